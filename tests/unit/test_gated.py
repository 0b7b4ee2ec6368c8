"""Gang members held by ``spec.schedulingGates``: named scenarios with values worked out by hand.

The rule (``streams.core.decide.hold``, Koordinator v1.8.0 with kube-scheduler v1.35.2): a gated
pod counts as a gang child, so the PreEnqueue basic check passes, yet it cannot pass PreEnqueue
or be bound until its gates are removed; while fewer than minMember members are free of gates,
the gang is held (``GangMemberGated``, after the same grace as the other PreEnqueue holds) and
the real scheduler says nothing. ``GangMembersUngated`` ends such a hold.

Each scenario feeds core records into one ``PartitionFold`` (grace 10 s, refresh 10 s) and
compares every output: event time (seconds after ``T0``), type, reason, facts and message.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from streams.core.explain import why_pod
from streams.core.fold import FoldSettings
from streams.core.state import from_wire, summary, to_wire
from streams.core.timefmt import format_time
from tests.fixtures.builders import at, fold_records, pod, podgroup

Q = ("example.com/quota",)
K = ("kueue.x-k8s.io/admission",)


def run(records: list[Any], end: float | None = None) -> tuple[list[dict[str, Any]], dict]:
    """Feed records keyed by their gang, then tick at ``end`` (seconds) when given."""
    store: dict = {}
    outputs = fold_records(records, end, store=store,
                           settings=FoldSettings(grace_seconds=10.0, refresh_seconds=10.0))
    return outputs, store


class Out(NamedTuple):
    t: float
    type: str
    reason: str
    facts: dict[str, Any]
    message: str


def gated(t: float, members: int, ungated: int, min_member: int, who: dict[str, tuple[str, ...]],
          message: str) -> Out:
    return Out(t, "Warning", "GangMemberGated",
               {"members": members, "ungated": ungated, "min_member": min_member,
                "gated": {name: list(gates) for name, gates in who.items()}}, message)


def ungated(t: float, members: int, min_member: int) -> Out:
    return Out(t, "Normal", "GangMembersUngated",
               {"members": members, "ungated": members, "min_member": min_member},
               f"gang ns/g has {members} of minMember {min_member} pods free of scheduling "
               f"gates; no longer held at PreEnqueue")


G1_HELD = ("gang ns/g has 1 of minMember 2 pods free of scheduling gates (g-1 waits for "
           "example.com/quota); scheduling is held at PreEnqueue until the gates of 1 more pod "
           "are removed (by the controller that set them)")
LIFT = [pod("g-1", 30, rv="2", type_="MODIFIED")]  # the controller removed the gate

SCENARIOS: dict[str, tuple[list[Any], float | None, list[Out]]] = {
    # g-0 alone is short (GangMembersInsufficient), then g-1 arrives gated: one hold, held since
    # 0 s; the gate is lifted at 5 s, inside the grace period: nothing to say.
    "a gate lifted within the grace period says nothing": (
        [pod("g-0", 0), pod("g-1", 1, gates=Q), pod("g-1", 5, rv="2", type_="MODIFIED")],
        3600, []),
    # Same hold, never lifted: at 0 + 10 s, 1 of 2 members is free of gates.
    "a gated member holds the gang once the grace period ends": (
        [pod("g-0", 0), pod("g-1", 1, gates=Q)], 11,
        [gated(10, 2, 1, 2, {"g-1": Q}, G1_HELD)]),
    "lifting the gate ends the hold with a Normal": (
        [pod("g-0", 0), pod("g-1", 1, gates=Q)] + LIFT, None,
        [gated(10, 2, 1, 2, {"g-1": Q}, G1_HELD), ungated(30, 2, 2)]),
    # min 2 and 2 of 3 members free of gates: the gang can be scheduled; g-2 waits alone.
    "enough members free of gates say nothing": (
        [pod("g-0", 0), pod("g-1", 0.5), pod("g-2", 1, gates=Q)], 3600, []),
    # Warned short at 10 s; g-1 joins gated at 15 s, news inside the refresh interval, sent
    # when it ends (20 s); the gate is lifted at 30 s.
    "a short gang whose new member is gated: the hold changes its reason": (
        [pod("g-0", 0), pod("g-1", 15, gates=Q)] + LIFT, None,
        [Out(10, "Warning", "GangMembersInsufficient",
             {"members": 1, "min_member": 2, "total_number": 2},
             "gang ns/g has 1 of minMember 2 pods; scheduling is held at PreEnqueue until 1 "
             "more exists"),
         gated(20, 2, 1, 2, {"g-1": Q}, G1_HELD), ungated(30, 2, 2)]),
    # A queue gates every pod of a workload until it admits it: nobody is free of gates.
    "every member gated: pods with the same gates share a clause, three names each": (
        [pod(f"p-{i}", i / 10, min_available="5", gates=K) for i in range(4)]
        + [pod("p-4", 0.4, min_available="5", gates=K + Q)], 11,
        [gated(10, 5, 0, 5, {"p-0": K, "p-1": K, "p-2": K, "p-3": K, "p-4": K + Q},
               "gang ns/g has 0 of minMember 5 pods free of scheduling gates (p-0, p-1, p-2 "
               "and 1 more wait for kueue.x-k8s.io/admission; p-4 waits for "
               "kueue.x-k8s.io/admission, example.com/quota); scheduling is held at "
               "PreEnqueue until the gates of 5 more pods are removed (by the controller that "
               "set them)")]),
    # The queue admits the workload: p-0 ungated at 20 s (news, sent at once: the last
    # warning was at 10 s), p-1 at 20.5 s (news inside the refresh interval, held back),
    # p-2 at 21 s: the hold ends.
    "a queue admitting the gang pod by pod": (
        [pod(f"p-{i}", 0, min_available="3", gates=K) for i in range(3)]
        + [pod("p-0", 20, rv="2", min_available="3", type_="MODIFIED"),
           pod("p-1", 20.5, rv="2", min_available="3", type_="MODIFIED"),
           pod("p-2", 21, rv="2", min_available="3", type_="MODIFIED")], 3600,
        [gated(10, 3, 0, 3, {"p-0": K, "p-1": K, "p-2": K},
               "gang ns/g has 0 of minMember 3 pods free of scheduling gates (p-0, p-1, p-2 "
               "wait for kueue.x-k8s.io/admission); scheduling is held at PreEnqueue until the "
               "gates of 3 more pods are removed (by the controller that set them)"),
         gated(20, 3, 1, 3, {"p-1": K, "p-2": K},
               "gang ns/g has 1 of minMember 3 pods free of scheduling gates (p-1, p-2 wait "
               "for kueue.x-k8s.io/admission); scheduling is held at PreEnqueue until the gates "
               "of 2 more pods are removed (by the controller that set them)"),
         ungated(21, 3, 3)]),
    # What koord-scheduler does when the gated pod came first: the gang ran a round, g-0 was
    # bound, g-1 (handed out by NextPod) failed to bind. g-0's bind makes the group once
    # satisfied (M2, Koordinator v1.8.0 core/gang.go:489-507): with the default match policy
    # the gang checks are skipped from then on (P4, core/core.go:213-216), so g-1 is held by
    # its own gates only (explain's SchedulingGated), not by the gang: no gang hold to tell.
    "a member bound alone while the other is gated": (
        [pod("g-1", 0, gates=Q), pod("g-0", 0.1, node="n1")] + LIFT, None, []),
    # The same with match policy waiting-and-running: the gang checks still apply, and g-0,
    # bound, counts as free of gates.
    "a member bound alone while the other is gated, waiting-and-running": (
        [pod("g-1", 0, gates=Q, match_policy="waiting-and-running"),
         pod("g-0", 0.1, node="n1", match_policy="waiting-and-running")]
        + [pod("g-1", 30, rv="2", type_="MODIFIED", match_policy="waiting-and-running")], None,
        [gated(10, 2, 1, 2, {"g-1": Q}, G1_HELD), ungated(30, 2, 2)]),
    # The gated member is deleted: the hold becomes a short gang, no Normal about gates.
    "a gated member deleted: the gang is short again": (
        [pod("g-0", 0), pod("g-1", 1, gates=Q), pod("g-1", 30, rv="2", type_="DELETED")],
        None,
        [gated(10, 2, 1, 2, {"g-1": Q}, G1_HELD),
         Out(30, "Warning", "GangMembersInsufficient",
             {"members": 1, "min_member": 2, "total_number": 2},
             "gang ns/g has 1 of minMember 2 pods; scheduling is held at PreEnqueue until 1 "
             "more exists")]),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_gated_members(name: str) -> None:
    records, end, expected = SCENARIOS[name]
    outputs, _ = run(records, end)
    assert [(o["observed_at"], o["type"], o["reason"], o["facts"], o["message"])
            for o in outputs] == \
        [(format_time(at(e.t)), e.type, e.reason, e.facts, e.message) for e in expected]
    for o in outputs:  # the id follows from the facts: the same on every replay
        assert o["id"].startswith(f"ns/g#{o['reason']}#")
    again, _ = run(records, end)
    assert [o["id"] for o in again] == [o["id"] for o in outputs]


def test_a_gated_member_of_a_podgroup_gang_tells_the_podgroup_too() -> None:
    outputs, _ = run([podgroup(0, 2), pod("g-0", 0, min_available=None, waits_for_podgroup=True),
                      pod("g-1", 0, min_available=None, waits_for_podgroup=True, gates=Q)], 11)
    # every member is told, the ungated one too, and the PodGroup
    assert [(o["reason"], [(i["kind"], i["name"]) for i in o["involved"]]) for o in outputs] == [
        ("GangMemberGated", [("Pod", "g-0"), ("Pod", "g-1"), ("PodGroup", "g")])]


def test_the_gates_are_kept_on_the_member_and_through_cycle_records() -> None:
    from tests.fixtures.builders import cycle

    _, store = run([pod("g-0", 0), pod("g-1", 1, gates=K + Q),
                    cycle("g-1", 2, 7, "Bind", "Error", reason="binding refused")])
    state = store["ns/g"]
    assert state.members["uid-g-1"].gates == K + Q and state.members["uid-g-0"].gates == ()
    assert state.gated == 1
    assert summary(state)["pods"]["ns/g-1"]["gates"] == list(K + Q)
    lifted = run([pod("g-0", 0), pod("g-1", 1, gates=Q), pod("g-1", 2, rv="2",
                                                           type_="MODIFIED")])[1]["ns/g"]
    assert lifted.gated == 0 and lifted.members["uid-g-1"].gates == ()


def test_a_state_with_gates_survives_its_wire_form_and_old_values_read_as_ungated() -> None:
    _, store = run([pod("g-0", 0), pod("g-1", 1, gates=K + Q)], 11)
    state = store["ns/g"]
    wire = to_wire(state)
    # a 13th value only for a gated member, or with a 14th: g-0, refused at PreEnqueue since
    # t=0 (decide.track_refusals), has no gates and refused_at T0
    assert [len(row) for row in wire["m"]] == [14, 13]
    assert wire["m"][1][12] == list(K + Q) and wire["m"][0][12:] == [[], at(0)]
    back = from_wire(wire)
    assert back == state and back.gated == 1 and to_wire(back) == wire
    # a table value stored before gates were kept: every member row has 12 values
    old = {**wire, "m": [row[:12] for row in wire["m"]]}
    before = from_wire(old)
    assert before.gated == 0 and all(m.gates == () for m in before.members.values())
    assert before.members["uid-g-1"] == state.members["uid-g-1"]._replace(gates=())


def test_why_each_member_of_a_gated_gang_is_pending() -> None:
    _, store = run([pod("g-0", 0), pod("g-1", 1, gates=Q)], 11)
    state = store["ns/g"]
    unblock = ("remove the scheduling gates of ns/g-1, set by the controller that owns them "
               "(g-1 waits for example.com/quota)")
    gated_pod = why_pod(state, "ns/g-1")
    assert (gated_pod["held_at"], gated_pod["held_by"]) == ("PreEnqueue", "schedulingGates of ns/g-1")
    assert [(r["reason"], r["message"]) for r in gated_pod["reasons"]] == [
        ("SchedulingGated", "the pod has scheduling gates (example.com/quota): kube-scheduler's "
                            "SchedulingGates plugin holds it at PreEnqueue until they are removed"),
        ("GangMemberGated", G1_HELD)]
    assert gated_pod["unblock"] == [unblock]
    other = why_pod(state, "ns/g-0")
    assert (other["held_at"], other["held_by"]) == (
        "PreEnqueue", "Coscheduling, behind the schedulingGates of ns/g-1")
    assert [(r["reason"], r["message"]) for r in other["reasons"]] == [("GangMemberGated", G1_HELD)]
    assert other["unblock"] == [unblock]


def test_a_gated_pod_of_a_gang_that_can_go_ahead_is_held_only_by_its_own_gates() -> None:
    _, store = run([pod("g-0", 0), pod("g-1", 0), pod("g-2", 1, gates=Q)], 11)
    why = why_pod(store["ns/g"], "ns/g-2")
    assert (why["held_at"], why["held_by"]) == ("PreEnqueue", "schedulingGates of ns/g-2")
    assert [r["reason"] for r in why["reasons"]] == ["SchedulingGated"]
    assert why["unblock"] == ["remove the scheduling gates of ns/g-2, set by the controller that "
                              "owns them (g-2 waits for example.com/quota)"]
    # g-0 passes the gang checks and has no attempt yet: v1.8 keeps one pod of the group in
    # the queue (the representative, not in any Event) and hands out the others in a round
    free = why_pod(store["ns/g"], "ns/g-0")
    assert (free["held_at"], free["held_by"], [r["reason"] for r in free["reasons"]]) == (
        None, None, ["NotYetAttempted"])


def test_a_gated_pod_of_a_short_gang_is_told_both() -> None:
    _, store = run([pod("g-0", 0, min_available="3"), pod("g-1", 1, min_available="3", gates=Q)],
                   11)
    why = why_pod(store["ns/g"], "ns/g-1")
    assert (why["held_at"], why["held_by"]) == ("PreEnqueue", "schedulingGates of ns/g-1")
    assert [r["reason"] for r in why["reasons"]] == ["SchedulingGated", "GangMembersInsufficient"]
    assert why["unblock"] == [
        "remove the scheduling gates of ns/g-1, set by the controller that owns them (g-1 waits "
        "for example.com/quota)",
        "create 1 more pod of gang ns/g, or lower min-available to 2"]


# -- gangstate explain pod, on the real-cluster case sc-gated/g ----------------------------------

EXPLAINED = {
    "sc-gated/g-1": """\
Pod:            sc-gated/g-1
Phase:          Pending
Node:           <none>
Gang:           sc-gated/g (Ready: 2 of minMember 2 pods, 0 bound, 0 waiting at Permit)
Representative: <not known without the scheduler shim (koord-scheduler keeps it in memory)>
Last cycle:     <none>
Held at:        PreEnqueue (schedulingGates of sc-gated/g-1)

Why it is pending:
  SchedulingGated: the pod has scheduling gates (example.com/quota): kube-scheduler's \
SchedulingGates plugin holds it at PreEnqueue until they are removed
  GangMemberGated: gang sc-gated/g has 1 of minMember 2 pods free of scheduling gates (g-1 \
waits for example.com/quota); scheduling is held at PreEnqueue until the gates of 1 more pod are \
removed (by the controller that set them)

What would unblock it:
  - remove the scheduling gates of sc-gated/g-1, set by the controller that owns them (g-1 \
waits for example.com/quota)
""",
    "sc-gated/g-0": """\
Pod:            sc-gated/g-0
Phase:          Pending
Node:           <none>
Gang:           sc-gated/g (Ready: 2 of minMember 2 pods, 0 bound, 0 waiting at Permit)
Representative: <not known without the scheduler shim (koord-scheduler keeps it in memory)>
Last cycle:     <none>
Held at:        PreEnqueue (Coscheduling, behind the schedulingGates of sc-gated/g-1)

Why it is pending:
  GangMemberGated: gang sc-gated/g has 1 of minMember 2 pods free of scheduling gates (g-1 \
waits for example.com/quota); scheduling is held at PreEnqueue until the gates of 1 more pod are \
removed (by the controller that set them)

What would unblock it:
  - remove the scheduling gates of sc-gated/g-1, set by the controller that owns them (g-1 \
waits for example.com/quota)
""",
}


@pytest.mark.parametrize("name", list(EXPLAINED))
def test_explain_pod_names_the_gated_member_its_gates_and_what_holds_the_others(
        name: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from streams.cli import main
    from tests.fixtures import tracegen

    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join([
        tracegen.pod("sc-gated", "g-0", 0, 1, gang="g", min_available=2),
        tracegen.pod("sc-gated", "g-1", 0.04, 2, gang="g", min_available=2, gates=Q),
    ]) + "\n")
    assert main(["explain", "pod", name, "--from", str(trace),
                 "--at", "2026-11-02T09:00:40Z"]) == 0
    assert capsys.readouterr().out == EXPLAINED[name]
    # once the gate is lifted nothing holds either pod
    with trace.open("a") as f:
        f.write(tracegen.pod("sc-gated", "g-1", 50, 3, gang="g", min_available=2,
                             type_="MODIFIED") + "\n")
    assert main(["explain", "pod", name, "--from", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "Held at:        <none>\n" in out
    assert "  no gang condition known to gangstate holds it\n" in out


def test_the_held_pods_gauge_counts_a_gated_gang_under_its_own_reason() -> None:
    from prometheus_client import generate_latest

    from streams.worker.metrics import TableCollector, WorkerMetrics
    from tests.kafka.test_worker_web import samples

    _, store = run([pod("g-0", 0), pod("g-1", 1, gates=Q)], 11)
    metrics = WorkerMetrics()
    metrics.registry.register(TableCollector(store))
    got = samples(generate_latest(metrics.registry).decode())
    held = {dict(labels)["reason"]: v for (name, labels), v in got.items()
            if name == "gangstate_pods_held_preenqueue"
            and dict(labels)["scheduler"] == "koord-scheduler"}
    assert held == {"GangNotInitialized": 0, "GangMembersInsufficient": 0,
                    "GangGroupIncomplete": 0, "GangMemberGated": 2,
                    "GangCompositeIncomplete": 0}
