"""The read side ages with the fold's clock (``streams.core.state.as_of``): a gang's storm and
failure episode are read at the partition's latest event time, ticks included, not at the
time of the gang's own latest record, which stops when the scheduler stops writing Events."""

from __future__ import annotations

from typing import Any

from streams.core.state import as_of
from streams.query.answers import explain_pod, gang_detail
from tests.fixtures.builders import at, attempt, fold_records, pod

SHORT = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def failing_gang() -> dict[str, Any]:
    """Gang ns/g (minMember 2): g-1 fails to fit 30 times, one a second from t=1 to t=30,
    its own fit error each time; the store after a tick at t=30."""
    records: list[Any] = [pod("g-0", 0), pod("g-1", 0)]
    records += [attempt("g-1", t, "ev-g1", "Filter", "Unschedulable", count=t,
                        reason="Insufficient nvidia.com/gpu", culprit="g-1", fit_error=SHORT,
                        waited=0) for t in range(1, 31)]
    store: dict[str, Any] = {}
    fold_records(records, 30, store=store)
    return store


def test_the_storm_falls_to_zero_a_minute_after_the_last_failure() -> None:
    """30 FailedScheduling Events in t=1..30: at the gang's own clock (t=30) all 30 are in
    the last 60 s (the seconds s with now - 60 < s <= now); read at t=60 still all 30; at
    t=61 the one of t=1 drops out: 29; at t=89 only t=30's: 1; at t=90 none: 0."""
    state = failing_gang()["ns/g"]
    assert gang_detail(state)["failed_attempts_per_minute"] == 30
    assert gang_detail(state, at(60))["failed_attempts_per_minute"] == 30
    assert gang_detail(state, at(61))["failed_attempts_per_minute"] == 29
    assert gang_detail(state, at(89))["failed_attempts_per_minute"] == 1
    assert gang_detail(state, at(90))["failed_attempts_per_minute"] == 0
    assert gang_detail(state, at(10))["failed_attempts_per_minute"] == 30  # earlier: own clock


def test_the_failure_episode_closes_when_the_scheduler_has_been_quiet() -> None:
    """The episode is open while its last failure (t=30) is at most QUIET_SECONDS (600 s)
    back: read at t=630 GangUnschedulable is still a finding and g-1 is held at Filter; at
    t=631 it is not, and neither is the reason of g-1's wait."""
    state = failing_gang()["ns/g"]
    reasons = [f["reason"] for f in gang_detail(state, at(630))["findings"]]
    assert "GangUnschedulable" in reasons
    assert explain_pod({"ns/g": state}, "ns/g-1", now=lambda _: at(630))["held_at"] == "Filter"
    assert "GangUnschedulable" not in [f["reason"]
                                       for f in gang_detail(state, at(631))["findings"]]
    later = explain_pod({"ns/g": state}, "ns/g-1", now=lambda _: at(631))
    assert "GangUnschedulable" not in [r["reason"] for r in later["reasons"]]


def test_as_of_never_moves_a_clock_back_and_never_changes_the_stored_state() -> None:
    state = failing_gang()["ns/g"]
    assert as_of(state, None) is state and as_of(state, at(5)) is state
    later = as_of(state, at(100))
    assert later.clock == at(100) and state.clock == at(30) and later is not state


def test_the_storm_gauge_is_read_at_the_partitions_clock() -> None:
    """``gangstate_scheduler_failed_events_per_minute{gang}``: 30 at the gang's own clock; no
    series once the partition's clock is at t=90 (no Event in the last 60 s)."""
    from streams.worker.metrics import TableCollector

    store = failing_gang()

    def storm(clock: Any) -> dict[str, float]:
        (family,) = [m for m in TableCollector(store, clock).collect()
                     if m.name == "gangstate_scheduler_failed_events_per_minute"]
        return {s.labels["gang"]: s.value for s in family.samples}

    assert storm(None) == {"ns/g": 30}
    assert storm(lambda _gang: at(61)) == {"ns/g": 29}
    assert storm(lambda _gang: at(90)) == {}
