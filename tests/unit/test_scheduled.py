"""``GangScheduled`` (``streams.core.rules.scheduled``): minMember members bound and not failed,
values worked out by hand.

Gang ns/g of minMember 2 (annotations); g-0 and g-1 created at t=0 and bound to n1 at t=1.
"""

from __future__ import annotations

from typing import Any

from streams.core.fold import FoldSettings, PartitionFold
from streams.core.timefmt import format_time
from tests.fixtures.builders import at, fold_records, pod


def told(records: list[Any], end: float = 60) -> list[tuple[str, dict[str, Any]]]:
    return [(o["observed_at"], o["facts"]) for o in fold_records(records, end)
            if o["schema"] == "gangstate.diagnostic/v1" and o["reason"] == "GangScheduled"]


def bound(name: str, t: float, rv: str = "2", phase: str = "Running") -> Any:
    return pod(name, t, rv=rv, type_="MODIFIED", node="n1", phase=phase)


BOTH = [pod("g-0", 0), pod("g-1", 0), bound("g-0", 1), bound("g-1", 1)]
T1 = format_time(at(1))


def test_two_of_minmember_two_bound_is_told_once():
    assert told(BOTH) == [(T1, {"bound": 2, "min_member": 2})]


def test_failed_members_recreated_are_not_told_again():
    # both fail at t=5; their replacements r-0 and r-1 are created at t=6 and bound at t=7:
    # 2 live members bound again, the facts already told, so nothing new. Counting the failed
    # pods (they keep spec.nodeName) would tell bound=3 at t=7 and bound=4 right after.
    recs = BOTH + [bound("g-0", 5, rv="3", phase="Failed"), bound("g-1", 5, rv="3", phase="Failed"),
                   pod("r-0", 6), pod("r-1", 6), bound("r-0", 7), bound("r-1", 7)]
    assert told(recs) == [(T1, {"bound": 2, "min_member": 2})]


def test_a_succeeded_member_still_counts():
    # a third member r-2 joins and is bound at t=3 (bound=3 told), then g-0 succeeds at t=4:
    # a finished member holds its place, so bound stays 3 and nothing is told again
    recs = BOTH + [pod("r-2", 2), bound("r-2", 3), bound("g-0", 4, rv="3", phase="Succeeded")]
    assert told(recs) == [(T1, {"bound": 2, "min_member": 2}),
                          (format_time(at(3)), {"bound": 3, "min_member": 2})]


def test_failed_members_below_minmember_are_not_scheduled():
    # g-1 fails before g-0 is bound: at t=2 one live member bound of minMember 2
    recs = [pod("g-0", 0), pod("g-1", 0), bound("g-1", 1), bound("g-1", 1.5, rv="3",
            phase="Failed"), bound("g-0", 2)]
    assert told(recs) == []


def test_failed_bound_is_counted_as_members_come_fail_and_go():
    # the counter GangState.failed_bound (bound and Failed), kept by put_member/drop_member,
    # after each record: g-0, g-1 bound at t=1 (0), g-0 fails at t=5 (1), g-1 fails at t=5
    # (2), g-0 deleted at t=6 (1), a failed pod without a node is not bound (still 1)
    fold = PartitionFold({}, FoldSettings())
    seen = []
    for rec in BOTH + [bound("g-0", 5, rv="3", phase="Failed"),
                       bound("g-1", 5, rv="3", phase="Failed"),
                       pod("g-0", 6, rv="4", type_="DELETED", node="n1", phase="Failed"),
                       pod("r-0", 6), pod("r-0", 6.5, rv="2", type_="MODIFIED", phase="Failed")]:
        fold.feed(rec.gang, rec)
        state = fold.store["ns/g"]
        seen.append((state.bound, state.failed_bound))
    assert seen == [(0, 0), (0, 0), (1, 0), (2, 0), (2, 1), (2, 2), (1, 1), (1, 1), (1, 1)]
    state = fold.store["ns/g"].copy()
    state.recount()  # the counter from a walk over the members agrees
    assert (state.bound, state.failed_bound) == (1, 1)
