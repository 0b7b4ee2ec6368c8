"""A member that was tried and does not fit is never "stranded" (``decide.track_refusals``,
``_tried_culprit``), as named scenarios with hand-worked times.

Every scenario: gang ns/pg of PodGroup pg; pods p0 and big-1 name it before it exists
(t=0, 1: not initialised, both refused at PreEnqueue, K core/core.go:209-212); PodGroup pg
(minMember 2) at t=10 ends the hold. big-1 asks 100 cpu of 8-cpu nodes. Default settings:
stranded after 120 s of event time from the first attempt since the hold ended.
"""

from __future__ import annotations

from typing import Any

import pytest

from streams.core.explain import findings
from tests.fixtures.builders import attempt, fold_records, pod, podgroup

FIT = "0/2 nodes are available: 2 Insufficient cpu."
PG = {"gang": "ns/pg", "waits_for_podgroup": True, "min_available": None}


def held() -> list[Any]:
    return [pod("p0", 0, **PG), pod("big-1", 1, **PG), podgroup(10, 2, name="pg")]


def run(records: list[Any], end: float = 300) -> tuple[list[str], dict]:
    store: dict = {}
    outputs = fold_records(records, end, store=store)
    return [o["reason"] for o in outputs if o["schema"] == "gangstate.diagnostic/v1"], store


# p0's rejection (B2, PreFilter) at t=11 names big-1 with its fit error; big-1's own Event
# never comes within the 300 s (the scheduler's Event writes are throttled): big-1 was tried
# and did not fit, so it is explained by GangUnschedulable (settled 10 s after t=11), never
# told stranded (it would have been at t=131).
NAMED_BY_ANOTHER = held() + [
    attempt("p0", 11, "ev-p0", "PreFilter", "UnschedulableAndUnresolvable",
            reason="GangGroupRejected", gang="ns/pg", culprit="big-1", fit_error=FIT,
            waited=0)]
# big-1's own FailedScheduling Event at t=60 (49 s late), before the stranded timer (t=131).
OWN_EVENT_LATE = held() + [
    attempt("p0", 11, "ev-p0", "Permit", "Wait", gang="ns/pg"),
    attempt("big-1", 60, "ev-big", "Filter", "Unschedulable", gang="ns/pg", culprit="big-1",
            fit_error=FIT)]
# nothing shows big-1 was tried: only p0 was attempted (waiting at Permit): big-1 is stranded
# at t=131 (the rule the real scheduler showed, tests/cluster/test_cluster_v18.py).
NEVER_TRIED = held() + [attempt("p0", 11, "ev-p0", "Permit", "Wait", gang="ns/pg")]


@pytest.mark.parametrize("name,records,stranded", [
    ("named as the culprit by another member's rejection", NAMED_BY_ANOTHER, False),
    ("its own Event comes late, before the timer", OWN_EVENT_LATE, False),
    ("never tried", NEVER_TRIED, True),
])
def test_a_member_tried_that_does_not_fit_is_not_stranded(name: str, records: list[Any],
                                                          stranded: bool) -> None:
    reasons, store = run(records)
    assert ("GangMembersStranded" in reasons) is stranded
    state = store["ns/pg"]
    big = state.member_by_name("ns/big-1")[1]
    assert (big.refused_at is not None) is stranded


def test_named_culprit_is_explained_by_its_fit_error() -> None:
    """In NAMED_BY_ANOTHER, explain has the failure episode naming big-1 with its fit error
    and no stranded finding."""
    _, store = run(NAMED_BY_ANOTHER, 30)
    found = {f["reason"]: f for f in findings(store["ns/pg"])}
    assert "GangMembersStranded" not in found
    assert found["GangUnschedulable"]["facts"]["unfit"] == {"big-1": FIT}


def test_an_attempt_after_the_warning_ends_the_stranded_finding() -> None:
    """NEVER_TRIED, then big-1's own Event at t=200 (after the warning at t=131): explain no
    longer calls it stranded (it was tried: its fit error explains it)."""
    records = NEVER_TRIED + [attempt("big-1", 200, "ev-big", "Filter", "Unschedulable",
                                     gang="ns/pg", culprit="big-1", fit_error=FIT)]
    reasons, store = run(records, 210)
    assert reasons.count("GangMembersStranded") == 1
    assert "GangMembersStranded" not in [f["reason"] for f in findings(store["ns/pg"])]
