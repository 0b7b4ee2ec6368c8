"""Members lost after the gang was scheduled: ``GangMembersLost`` / ``GangMembersRestored``
(``streams.core.lost``), as named scenarios with the values worked out by hand.

Every scenario: gang ns/g of minMember 2 (annotations), g-0 and g-1 created at t=0 and bound
to n1 at t=1 (Running): ``GangScheduled`` at t=1. Then what happens to them; the fold runs
to t=60. ``GangMembersLost`` is due 5 s (``LOST_SETTLE_SECONDS``) after the latest loss.
"""

from __future__ import annotations

from typing import Any

import pytest

from streams.core.records import PodObserved
from streams.core.state import from_wire, to_wire
from streams.core.timefmt import format_time
from tests.fixtures.builders import at, fold_records, pod, podgroup

ONCE = ("a replacement pod created by its controller skips the gang checks because the gang "
        "group was once satisfied, so it is scheduled on its own as soon as it fits, without "
        "waiting for minMember")


def run(records: list[Any], end: float = 60) -> list[tuple[str, str, dict[str, Any]]]:
    store: dict = {}
    outputs = fold_records(records, end, store=store)
    for state in store.values():
        assert from_wire(to_wire(state)) == state
    return [(o["observed_at"], o["reason"], o["facts"]) for o in outputs
            if o["schema"] == "gangstate.diagnostic/v1" and o["reason"] != "GangScheduled"]


def scheduled(**kind: str) -> list[Any]:
    recs: list[Any] = [pod(f"g-{i}", 0, **kind) for i in range(2)]
    return recs + [pod(f"g-{i}", 1, rv="2", type_="MODIFIED", node="n1", phase="Running",
                       **kind) for i in range(2)]


def gone(name: str, t: float, rv: str = "3", **kind: str) -> PodObserved:
    return pod(name, t, rv=rv, type_="DELETED", node="n1", phase="Running", **kind)


def failed(name: str, t: float, reason: str = "", rv: str = "3") -> PodObserved:
    return pod(name, t, rv=rv, type_="MODIFIED", node="n1", phase="Failed")._replace(
        status_reason=reason)


def terminating(name: str, t: float, rv: str = "3") -> PodObserved:
    return pod(name, t, rv=rv, type_="MODIFIED", node="n1", phase="Running")._replace(
        terminating=True)


def lost(t: float, lost_: dict[str, str], remaining: int = 1,
         policy: str = "once-satisfied") -> tuple[str, str, dict[str, Any]]:
    return (format_time(at(t)), "GangMembersLost",
            {"lost": lost_, "remaining": remaining, "min_member": 2, "match_policy": policy})


SCENARIOS = {
    # g-1 deleted at t=10 (a user, its controller, an eviction or the pod GC of a node gone):
    # 1 of 2 remain; told at t=15.
    "member deleted": (scheduled() + [gone("g-1", 10)], [lost(15, {"g-1": "deleted"})]),
    # the kubelet evicted g-1: phase Failed, status.reason Evicted.
    "member evicted by the kubelet": (scheduled() + [failed("g-1", 10, "Evicted")],
                                      [lost(15, {"g-1": "failed (Evicted)"})]),
    "member failed": (scheduled() + [failed("g-1", 10)], [lost(15, {"g-1": "failed"})]),
    # g-0 finished its work: not lost; g-1 failed at t=10 and its controller created g-2
    # (pending) at t=12: 1 (g-0, Succeeded) of 2 remain, told at t=15.
    "a finished member is not lost": (
        scheduled() + [pod("g-0", 8, rv="3", type_="MODIFIED", node="n1", phase="Succeeded"),
                       failed("g-1", 10), pod("g-2", 12)], [lost(15, {"g-1": "failed"})]),
    # the same without a replacement: no member is alive (one finished, one failed): the
    # job is over, nothing said.
    "a finished member and a failed one": (
        scheduled() + [pod("g-0", 8, rv="3", type_="MODIFIED", node="n1", phase="Succeeded"),
                       failed("g-1", 10)], []),
    "every member finished": (
        scheduled() + [pod(f"g-{i}", 8, rv="3", type_="MODIFIED", node="n1",
                           phase="Succeeded") for i in range(2)], []),
    # the whole job deleted: both pods deleted one after the other, 2 s apart: nothing
    "whole gang deleted one by one": (scheduled() + [gone("g-0", 10), gone("g-1", 12)], []),
    # the job deleted with a grace period: both terminating, then gone
    "whole gang terminating, then deleted": (
        scheduled() + [terminating("g-0", 10), terminating("g-1", 10), gone("g-0", 11, "4"),
                       gone("g-1", 40, "4")], []),
    # g-1 deleted at 10, its controller's replacement g-2 at 11 bound at 12, before the
    # settling time: the gang is whole again by t=15, nothing said.
    "replaced within the settling time": (
        scheduled() + [gone("g-1", 10), pod("g-2", 11),
                       pod("g-2", 12, rv="2", type_="MODIFIED", node="n1",
                           phase="Running")], []),
    # replaced after the warning: GangMembersRestored at t=30 (2 of 2 bound again).
    "replaced after the warning": (
        scheduled() + [gone("g-1", 10), pod("g-2", 20),
                       pod("g-2", 30, rv="2", type_="MODIFIED", node="n1", phase="Running")],
        [lost(15, {"g-1": "deleted"}),
         (format_time(at(30)), "GangMembersRestored", {"bound": 2, "min_member": 2})]),
    # a replacement pending does not end the loss; a second loss (g-0 evicted) at t=20 is
    # news: told again at t=25 with both, 0 of 2 remain (g-2 is alive, pending).
    "a second loss": (
        scheduled() + [gone("g-1", 10), pod("g-2", 12), failed("g-0", 20, "Evicted")],
        [lost(15, {"g-1": "deleted"}),
         lost(25, {"g-0": "failed (Evicted)", "g-1": "deleted"}, remaining=0)]),
    # 3 bound of minMember 2, one lost: still 2: not short.
    "a loss above minMember": (
        scheduled() + [pod("g-2", 0), pod("g-2", 1, rv="2", type_="MODIFIED", node="n1",
                                          phase="Running"), gone("g-2", 10)], []),
    # never scheduled (1 of 2 bound): no loss to tell
    "a gang never scheduled": (
        [pod("g-0", 0), pod("g-1", 0),
         pod("g-0", 1, rv="2", type_="MODIFIED", node="n1", phase="Running"),
         gone("g-0", 10)], []),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_members_lost_after_the_gang_was_scheduled(name: str) -> None:
    records, expected = SCENARIOS[name]
    assert run(records) == expected


def test_the_podgroup_deleted_with_its_pods_is_no_loss() -> None:
    """A PodGroup gang (minMember 2) whose job is deleted: g-1 deleted at t=10, the PodGroup
    at t=11 (its members become pods of no gang, rule M5), g-0 at t=12: nothing."""
    pg = {"min_available": None}
    records = [podgroup(0, 2)] + scheduled(**pg) + [
        gone("g-1", 10, **pg), podgroup(11, 2, rv="2", type_="DELETED"), gone("g-0", 12, **pg)]
    assert run(records) == []


@pytest.mark.parametrize("policy,text", [
    ("once-satisfied", ONCE),
    ("waiting-and-running",
     "a replacement pod created by its controller passes Permit with the bound members "
     "(match policy waiting-and-running), so it is scheduled as soon as it fits"),
    ("only-waiting",
     "a replacement pod created by its controller must wait at Permit with minMember members "
     "at once (match policy only-waiting counts no bound member), so fewer replacements than "
     "minMember time out"),
])
def test_the_message_says_what_the_scheduler_will_and_will_not_do(policy: str, text: str
                                                                   ) -> None:
    kind = {"match_policy": policy}
    outputs = fold_records(scheduled(**kind) + [gone("g-1", 10, **kind)], 60)
    told = [o for o in outputs if o.get("reason") == "GangMembersLost"]
    assert len(told) == 1 and told[0]["type"] == "Warning"
    assert told[0]["message"] == (
        "gang ns/g lost members after it was scheduled: g-1 deleted; 1 member of minMember 2 "
        "remains bound; koord-scheduler neither evicts the remaining members nor restarts the "
        f"gang; {text}; a pod without a controller is created again by no one")
    assert [i["name"] for i in told[0]["involved"]] == ["g-0"]


def test_explain_tells_the_loss_in_place_of_gang_scheduled() -> None:
    """Once told, ``findings`` holds ``GangMembersLost`` (since the loss, t=10) and not
    ``GangScheduled``: g-1 failed keeps its node, so 2 pods are bound, but 1 holds its place."""
    from streams.core.explain import findings

    store: dict = {}
    fold_records(scheduled() + [failed("g-1", 10, "Evicted")], 20, store=store)
    found = [(f["reason"], f.get("since")) for f in findings(store["ns/g"])]
    assert found == [("GangMembersLost", format_time(at(10)))]


def test_a_second_loss_restored_before_it_is_told_still_ends_the_first() -> None:
    """g-1 deleted at 10 (told at 15), g-0 evicted at 20 and both replaced and bound by 22,
    before the second loss is told (25): the first warning still ends, with
    GangMembersRestored at 22 (2 of 2 bound again)."""
    records = scheduled() + [
        gone("g-1", 10), failed("g-0", 20, "Evicted"),
        pod("g-2", 21), pod("g-3", 21),
        pod("g-2", 22, rv="2", type_="MODIFIED", node="n1", phase="Running"),
        pod("g-3", 22, rv="2", type_="MODIFIED", node="n1", phase="Running")]
    assert run(records) == [
        lost(15, {"g-1": "deleted"}),
        (format_time(at(22)), "GangMembersRestored", {"bound": 2, "min_member": 2})]


def test_explain_pod_on_the_member_left_bound_says_the_gang_lost_members() -> None:
    """g-1 evicted at t=10 (told at 15): ``explain pod ns/g-0``, the member still Running on
    n1, is held nowhere and carries the gang's ``GangMembersLost`` (a new user's run saw the
    bound member's explanation say nothing of it); before the loss is told it carries none."""
    from streams.core.explain import why_pod

    store: dict = {}
    fold_records(scheduled() + [failed("g-1", 10, "Evicted")], 12, store=store)
    early = why_pod(store["ns/g"], "ns/g-0")
    assert (early["member"], early["node"], early["reasons"]) == (True, "n1", [])
    fold_records(scheduled() + [failed("g-1", 10, "Evicted")], 20, store=(store := {}))
    answer = why_pod(store["ns/g"], "ns/g-0")
    assert (answer["node"], answer["held_at"]) == ("n1", None)
    assert [(r["reason"], r["facts"]) for r in answer["reasons"]] == [
        ("GangMembersLost", {"lost": {"g-1": "failed (Evicted)"}, "remaining": 1,
                             "min_member": 2, "match_policy": "once-satisfied"})]
    # and what makes the gang whole again (a new user's run read "<nothing gangstate can
    # name>" under the warning)
    assert answer["unblock"] == [
        "create 1 pod of gang ns/g in place of the lost g-1 (its controller does, if it has "
        "one), so that minMember 2 members run again; or, if the job can go on with fewer, "
        "lower minMember"]


@pytest.mark.parametrize("name,phase", [
    # g-1 deleted at 10: 1 of minMember 2 holds its place, g-0 still runs
    ("member deleted", "Degraded"),
    ("member evicted by the kubelet", "Degraded"),
    # g-0 Succeeded, g-1 failed, g-2 (replacement) pending and alive: still short
    ("a finished member is not lost", "Degraded"),
    # no member alive (one Succeeded, one Failed): the job is over, not degraded
    ("a finished member and a failed one", "Scheduled"),
    # 2 of 2 bound again at t=30
    ("replaced after the warning", "Scheduled"),
    # the whole job deleted (no PodGroup): the gang is deleted, not degraded
    ("whole gang deleted one by one", "Deleted"),
    # 3 bound of minMember 2, one lost: still 2
    ("a loss above minMember", "Scheduled"),
])
def test_the_phase_of_a_gang_that_lost_members(name: str, phase: str) -> None:
    """``GangState.phase`` at t=60 of the scenarios above: ``Degraded`` while fewer than
    minMember hold their place and a member is alive (before, such a gang read
    ``Gathering`` with all its remaining members bound); ``Scheduled`` again once restored."""
    records, _ = SCENARIOS[name]
    store: dict = {}
    fold_records(records, 60, store=store)
    assert store["ns/g"].phase == phase


def test_the_history_tells_when_a_gang_became_degraded() -> None:
    """g-1 failed (Evicted) at t=10 keeps its node, so the counts the history compares do
    not change: the entry of that record still tells ``phase Scheduled -> Degraded``."""
    store: dict = {}
    fold_records(scheduled() + [failed("g-1", 10, "Evicted")], 20, store=store)
    changes = [e[1] for e in store["ns/g"].history]
    assert any("phase Scheduled -> Degraded" in c for c in changes), changes


def test_describe_shows_a_member_whose_deletion_runs_its_grace_period() -> None:
    """g-1 asked to be deleted at t=10 (grace period running, still Running on n1): describe
    lists it ``Running (terminating)``, not as an ordinary running member (a new user saw no
    sign of the deletion for its 30 s grace)."""
    from streams.cli.query import format_gang
    from streams.query.answers import gang_detail

    store: dict = {}
    fold_records(scheduled() + [terminating("g-1", 10)], 12, store=store)
    detail = gang_detail(store["ns/g"])
    assert [(p, d["phase"], d["terminating"]) for p, d in sorted(detail["pods"].items())] == [
        ("ns/g-0", "Running", False), ("ns/g-1", "Running", True)]
    rows = [line.split() for line in format_gang(detail).splitlines()
            if line.startswith("  g-")]
    assert [row[:4] for row in rows] == [["g-0", "Running", "n1", "<none>"],
                                         ["g-1", "Running", "(terminating)", "n1"]]
