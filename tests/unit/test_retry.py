"""A gang its scheduler stopped trying after its preemption made room: ``GangAwaitingRetry``
and ``ActivateGang`` (rule PR7, ``streams/core/rules/retry.py``), as named scenarios with the
values worked out by hand.

Every scenario: gang ns/g of 2 x 1 GPU (minMember 2); the scheduler preempts low/v-0 and low/v-1
(30 s grace) for g-0 and g-1 at t=1.0/1.1, the members fail with ``not eligible due to a
terminating pod`` until t=30.5 (``test_preemption.in_progress_then_bound``), and the victims are
gone at t=31.0/31.2. What the real scheduler did next in about one run in five: nothing at
all (the rejected member waits for the 5-minute flush), so no record comes.
"""

from __future__ import annotations

from streams.core.records import CycleObserved
from streams.core.state import from_wire, to_wire
from streams.core.timefmt import format_time
from tests.fixtures.builders import at, fold_records
from tests.unit.test_preemption import GPU, failed, in_progress_then_bound

STUCK = in_progress_then_bound()[:-2]  # the two binds at t=31.5 left out
GONE = format_time(at(31.2))


def outputs(records: list, end: float = 60, store: dict | None = None) -> list[tuple]:
    store = {} if store is None else store
    out = fold_records(records, end, store=store)
    for state in store.values():
        assert from_wire(to_wire(state)) == state
    return [(o["schema"].split("/")[0].split(".")[1],
             o.get("reason"), o.get("observed_at") or o.get("issued_at")) for o in out]


def shim_record(t: float, pod: str = "g-0", stage: str = "PreFilter",
                status: str = "Unschedulable") -> CycleObserved:
    """A record of the scheduler shim (cycle 7) for ``pod``, naming g-0 the representative."""
    return CycleObserved(at(t), "koord-scheduler", 7, f"ns/{pod}", f"uid-{pod}", "ns/g", "ns/g",
                         stage, status, "", "", "ns/g-0", None, shim="shim-a")


def test_no_attempt_after_the_victims_went_is_told_once_and_no_stale_unschedulable() -> None:
    """The last victim is gone at 31.2; 5 s later (36.2) with no attempt since:
    ``GangAwaitingRetry`` (Warning) on both members, naming the victims, when the last went,
    and the members waiting; no ``GangUnschedulable`` from the attempts before (the fold runs
    to t=600: told once); without a shim, no command, and the message says what a user can
    do."""
    store: dict = {}
    out = fold_records(STUCK, 600, store=store)
    assert [(o["reason"], o["observed_at"]) for o in out
            if o["schema"] == "gangstate.diagnostic/v1"] == [
        ("GangPreempting", format_time(at(2.1))), ("GangAwaitingRetry", format_time(at(36.2)))]
    assert [o for o in out if o["schema"] == "gangstate.command/v1"] == []
    (d,) = [o for o in out if o["reason"] == "GangAwaitingRetry"]
    assert (d["type"], d["facts"]) == ("Warning", {
        "victims": ["low/v-0", "low/v-1"], "gone_at": GONE, "waiting": ["g-0", "g-1"],
        "activated": False})
    assert [i["name"] for i in d["involved"]] == ["g-0", "g-1"]
    assert d["message"] == (
        f"gang ns/g: its preemption made room (its victims low/v-0 and low/v-1 were gone by "
        f"{GONE}) but koord-scheduler has not tried it since: Coscheduling registers no "
        f"cluster events, so g-0 and g-1 wait in the scheduler's unschedulable pods for "
        f"kube-scheduler's flush, up to 5 minutes after their last attempt; deleting them so "
        f"that their controller creates them again retries the gang now")
    # explain: the finding, and each member held in the queue by Coscheduling
    from streams.core.explain import findings, why_pod

    state = store["ns/g"]
    assert [f["reason"] for f in findings(state)] == ["GangAwaitingRetry"]
    why = why_pod(state, "ns/g-1")
    assert (why["held_at"], why["held_by"], [r["reason"] for r in why["reasons"]]) == (
        "the scheduling queue (unschedulable pods)",
        "Coscheduling, which registers no cluster events", ["GangAwaitingRetry"])
    assert why["unblock"][0].startswith("delete the gang's pending pods")


def test_with_a_shim_the_gang_is_activated() -> None:
    """A shim reported the gang (g-0 its representative) before the preemption: at 36.2 the
    diagnostic says so, and ``ActivateGang`` (reason ``PreemptionDone``, epoch 1, no
    compare-and-swap) follows it; the shim's next record (the activated g-0 at PreEnqueue, at
    36.5) ends the finding, and the members binding at 36.8 tell ``GangScheduled``."""
    store: dict = {}
    records = [shim_record(0.4)] + STUCK
    out = fold_records(records, 36.3, store=store)
    (cmd,) = [o for o in out if o["schema"] == "gangstate.command/v1"]
    assert {k: cmd[k] for k in ("type", "reason", "epoch", "expected_representative",
                                "representative", "gang_group", "issued_at")} == {
        "type": "ActivateGang", "reason": "PreemptionDone", "epoch": 1,
        "expected_representative": None, "representative": "ns/g-0", "gang_group": "ns/g",
        "issued_at": format_time(at(36.2))}
    (d,) = [o for o in out if o.get("reason") == "GangAwaitingRetry"]
    assert d["facts"]["activated"] is True
    assert d["message"].endswith("; gangstate asked the scheduler shim to activate them "
                                 "(ActivateGang)")
    from streams.core.explain import findings
    from tests.unit.test_preemption import member

    later = fold_records([shim_record(36.5, stage="PreEnqueue", status="Success"),
                          member("g-0", 36.8, rv="3", node="node-a"),
                          member("g-1", 36.8, rv="3", node="node-b")], 60, store=store)
    assert [f["reason"] for f in findings(store["ns/g"])] == ["GangScheduled"]
    assert [o["reason"] for o in later if o["schema"] == "gangstate.diagnostic/v1"] == [
        "GangScheduled"]


def test_an_attempt_after_the_victims_went_is_not_awaiting_retry() -> None:
    """A failed attempt at 33 (after the last victim went at 31.2): the scheduler is trying;
    the preemption was wasted (PR6, 5 s after the last victim gone: 36.2), then the episode's
    ``GangUnschedulable``; never ``GangAwaitingRetry``."""
    reasons = [r for kind, r, _ in outputs(STUCK + [failed("g-0", 33, 40, GPU, None)])
               if kind == "diagnostic"]
    assert "GangAwaitingRetry" not in reasons
    assert reasons[:2] == ["GangPreempting", "GangPreemptionWasted"]


def test_a_gang_that_binds_is_never_awaiting_retry() -> None:
    assert [r for kind, r, _ in outputs(in_progress_then_bound()) if kind == "diagnostic"] == [
        "GangPreempting", "GangScheduled"]


def test_a_new_preemption_is_told_again() -> None:
    """Told at 36.2 for v-0 and v-1; the scheduler then preempts low/v-2 for g-0 at 40 (a new
    preemption: in progress again), v-2 is gone at 50 and nothing is tried since: told again at
    55, naming all three victims."""
    from tests.unit.test_preemption import preempted

    records = STUCK + [preempted("v-2", "node-a", "g-0", 40.0),
                       preempted("v-2", "node-a", "g-0", 50.0, type_="Deleted")]
    told = [(r, t) for kind, r, t in outputs(records, 120) if r == "GangAwaitingRetry"]
    assert told == [("GangAwaitingRetry", format_time(at(36.2))),
                    ("GangAwaitingRetry", format_time(at(55)))]
