"""Gang groups: a complete gang held because another gang of its group is short, missing or
uninitialised (``GangGroupIncomplete``), with the other gangs' state arriving as summaries
through the input log; the result does not depend on how the two gangs' records interleave."""

from __future__ import annotations

import json


import pytest

from streams.wire.contracts import parse_time
from streams.wire.traces import fold_lines
from tests.fixtures.tracegen import pod

GROUPS = ["ml/a", "ml/b"]
END = parse_time("2026-11-02T10:00:00Z")


def gang_a() -> list[str]:
    return [pod("ml", "a-0", 0, 10, gang="a", min_available=2, groups=GROUPS),
            pod("ml", "a-1", 1, 11, gang="a", min_available=2, groups=GROUPS)]


def gang_b(late: float = 30) -> list[str]:
    return [pod("ml", "b-0", 2, 12, gang="b", min_available=2, groups=GROUPS),
            pod("ml", "b-1", late, 13, gang="b", min_available=2, groups=GROUPS)]


def fold(lines: list[str]):
    return fold_lines(((n, line.encode()) for n, line in enumerate(lines, 1)), END)


def reasons_by_gang(result) -> dict[str, list[tuple[str, dict]]]:
    out: dict[str, list[tuple[str, dict]]] = {}
    for d in result.diagnostics:
        out.setdefault(d["gang"], []).append((d["reason"], d["facts"]))
    return out


def test_a_complete_gang_is_held_by_a_short_gang_of_its_group():
    a, b = gang_a(), gang_b()
    result = fold([a[0], a[1], b[0], b[1]])
    got = reasons_by_gang(result)
    assert got["ml/a"] == [
        ("GangGroupIncomplete", {"gang_group": "ml/a,ml/b", "blocking_gang": "ml/b",
                                 "members": 1, "min_member": 2}),
        ("GangMembersSatisfied", {"members": 2, "min_member": 2}),
    ]
    assert got["ml/b"] == [
        ("GangMembersInsufficient", {"members": 1, "min_member": 2, "total_number": 2}),
        ("GangMembersSatisfied", {"members": 2, "min_member": 2}),
    ]
    first_of_a = next(d for d in result.diagnostics if d["gang"] == "ml/a")
    message = first_of_a["message"]
    assert message == ("gang ml/a is complete, but gang ml/b of its gang group ml/a,ml/b has 1 "
                       "of minMember 2 pods; scheduling is held at PreEnqueue until every gang "
                       "of the group has minMember pods")
    assert [i["name"] for i in first_of_a["involved"]] == ["a-0", "a-1"]
    assert first_of_a["observed_at"] == "2026-11-02T09:00:10.000000Z"  # a-0 + grace


def test_a_missing_gang_of_the_group_is_named():
    result = fold(gang_a())
    assert reasons_by_gang(result)["ml/a"] == [
        ("GangGroupIncomplete", {"gang_group": "ml/a,ml/b", "blocking_gang": "ml/b",
                                 "members": 0})]
    assert result.states["ml/a"].phase == "Ready"  # enough members of its own


def test_an_uninitialised_gang_of_the_group_is_named():
    lines = gang_a() + [pod("ml", "b-0", 2, 12, gang="b", groups=GROUPS)]  # no min-available
    got = reasons_by_gang(fold(lines))
    assert got["ml/a"] == [("GangGroupIncomplete", {"gang_group": "ml/a,ml/b",
                                                    "blocking_gang": "ml/b", "members": 1})]
    assert got["ml/b"] == [("GangNotInitialized", {"members": 1})]


@pytest.mark.parametrize("order", ["time", "a-first", "b-first", "alternating"])
def test_the_result_is_the_same_for_any_interleaving(order):
    a, b = gang_a(), gang_b()
    lines = {"time": [a[0], a[1], b[0], b[1]], "a-first": a + b, "b-first": b + a,
             "alternating": [b[0], a[0], b[1], a[1]]}[order]
    result = fold(lines)
    reference = fold([a[0], a[1], b[0], b[1]])
    assert {g: s.phase for g, s in result.states.items()} == {"ml/a": "Ready", "ml/b": "Ready"}
    for gang in ("ml/a", "ml/b"):
        def news(state):  # what the peers said, not when they said it
            return {g: (p.groups, p.exists, p.initialized, p.members, p.min_member)
                    for g, p in state.group.peers.items()}
        assert news(result.states[gang]) == news(reference.states[gang])
        assert result.states[gang].members.keys() == reference.states[gang].members.keys()
    # every warning series is closed by GangMembersSatisfied, whatever the order
    last = {g: ds[-1][0] for g, ds in reasons_by_gang(result).items()}
    assert all(reason == "GangMembersSatisfied" for reason in last.values())


def test_summaries_are_exchanged_only_when_they_change():
    result = fold(gang_a() + gang_b())
    assert result.diagnostics  # sanity
    # each gang's last sent summary equals its own current summary, and peers agree
    a, b = result.states["ml/a"], result.states["ml/b"]
    assert a.group.peers["ml/b"].members == 2 and b.group.peers["ml/a"].members == 2
    assert a.group.sent_summary == (("ml/a", "ml/b"), True, True, 2, 2, False)


def test_history_explains_how_the_gang_got_here():
    result = fold(gang_a() + gang_b())
    history = result.states["ml/a"].history
    changes = [h[1] for h in history]
    assert changes[0] == "phase NotInitialized -> Gathering; members 0 -> 1; spec from Pod/a-0"
    assert "emitted GangGroupIncomplete" in changes
    assert history[-1][1] == "emitted GangMembersSatisfied"
    assert history[-1][2] == "summary of gang ml/b: 2 pods, minMember 2"
    assert json.dumps(history)  # JSON-ready


def test_commands_of_a_multi_gang_group_take_the_cycle_number_as_epoch():
    """Gang ml/a has a gated member a-g and 2 of minMember 2 free of gates, its group is
    complete; the shim names a-g the representative in cycle 700: the RepresentativeGated
    switch to a-0 takes the cycle number as its epoch."""
    from tests.fixtures.tracegen import cycle
    refused = json.loads(cycle("ml", "a-1", 5, 700, "PreEnqueue", "UnschedulableAndUnresolvable",
                               gang="ml/a", reason="RepresentativeExists",
                               representative="ml/a-g"))
    lines = gang_a() + gang_b(late=3) + [
        pod("ml", "a-g", 4, 14, gang="a", min_available=2, groups=GROUPS,
            gates=("example.com/quota",)),
        json.dumps({**refused, "shim": "shim-1"})]
    commands = fold(lines).commands
    assert [(c["id"], c["epoch"], c["gang_group"], c["representative"], c["reason"])
            for c in commands] == [("ml/a,ml/b#700", 700, "ml/a,ml/b", "ml/a-0",
                                    "RepresentativeGated")]


