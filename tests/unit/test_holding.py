"""gangstate's hold (``streams.core.rules.holding``, rules H1-H5): a gang that cannot fit is held
out of the scheduling queue, told ``GangHeld`` once the scheduler shim applies it, renewed,
and released when the cluster, the gang or the settings change.

The gang: ns/g, minMember 3, three pods of 1 nvidia.com/gpu each; the scheduler shim reports a
failed round every second from t=1 s, each with the cluster's room as the watch producer's node
cache makes it: 2 nodes of 1 GPU, nothing bound (allocatable 2000, room 2; every pod evictable,
room_preempting 2). The members ask 3000 milli-GPU, the cluster could free 2000 at most:
``beyond_cluster`` is 1000, so it cannot fit; the episode settles at t=11 s (``since`` 1 s +
10 s), and the hold follows on that record."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from producers.watch.node_cache import NodeCache
from streams.core.records import CapacityObserved, Capacity, CycleObserved
from streams.core.settings import FoldSettings
from streams.core.explain import why_pod
from streams.core.fold import PartitionFold
from streams.core.records import AckObserved, Tick
from streams.core.timefmt import format_time
from tests.fixtures.builders import ack, at, kube_pod, pod, podgroup
from tests.unit.test_cannot_fit import GPU, node, packs

ON = FoldSettings(holds=True, hold_ttl_seconds=30, hold_renew_seconds=10, hold_max_seconds=100)
FIT_ERROR = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
ROOM_2 = Capacity(GPU, 1000, 2000, 2000, 2, 2, 1000, (), 0, 2)


def fold_records(records: list[Any], end: float | None = None,
                 settings: FoldSettings | None = None,
                 table: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every output of one ``PartitionFold`` fed ``records``, each keyed by its gang (an ack by
    its gang group, as the shim keys it), then a ``Tick`` at ``end`` seconds; the gang states
    end in ``table`` when given."""
    fold = PartitionFold({} if table is None else table,
                         FoldSettings() if settings is None else settings)
    out: list[dict[str, Any]] = []
    for rec in records:
        out += fold.feed(rec.gang_group if isinstance(rec, AckObserved) else rec.gang, rec)
    if end is not None:
        out += fold.feed(None, Tick(at(end)))
    return out


def t(seconds: float) -> str:
    return format_time(at(seconds))


def failed(t: float, cycle: int, capacity: Capacity | None = ROOM_2, culprit: str = "g-2",
           gang: str = "ns/g") -> CycleObserved:
    """The shim's record of a member's own fit error in round ``cycle``."""
    ns = gang.split("/")[0]
    return CycleObserved(at(t), "koord-scheduler", cycle, f"{ns}/{culprit}", f"uid-{culprit}",
                         gang, gang, "Filter", "Unschedulable", "", FIT_ERROR, None, None, "",
                         f"{ns}/{culprit}", FIT_ERROR, 2, capacity, "koord-scheduler", cycle)


def gang(min_available: str = "3", **settings: str) -> list[Any]:
    return [pod(f"g-{i}", 0.1 * i, min_available=min_available, **settings) for i in range(3)]


def scheduler_event(t: float, capacity: Capacity | None = ROOM_2,
                    culprit: str = "g-2") -> CycleObserved:
    """The scheduler's FailedScheduling Event of the same failure, as the watch producer reads
    it (no cycle number; the storm window counts these, not the shim's records)."""
    return failed(t, 0, capacity, culprit)._replace(cycle=None, attempt=f"ev-{culprit}#{t}",
                                                    shim="", round=None)


def storm(until: int = 12, capacity: Capacity = ROOM_2) -> list[Any]:
    """One failed round a second from t=1 to ``until`` - 1: the shim's record of g-2's own fit
    error, then the scheduler's Event of it."""
    return [rec for t in range(1, until)
            for rec in (failed(t, 100 + t, capacity), scheduler_event(t, capacity))]


def of(outputs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in outputs if o.get("type") == kind or o.get("reason") == kind]


def test_a_gang_that_cannot_fit_is_held_once_its_episode_settled() -> None:
    assert FoldSettings().holds  # on by default
    out = fold_records(gang() + storm(), settings=replace(ON, holds=False))
    assert of(out, "HoldGang") == []
    out = fold_records(gang() + storm(), settings=ON)
    unschedulable = of(out, "GangUnschedulable")
    holds = of(out, "HoldGang")
    assert [d["observed_at"] for d in unschedulable] == [t(11)]
    assert len(holds) == 1
    hold = holds[0]
    assert (hold["id"], hold["epoch"], hold["reason"], hold["ttl_seconds"]) == \
        ("ns/g#1", 1, "GangCannotFit", 30)
    assert hold["expected_representative"] is None
    assert hold["issued_at"] == unschedulable[0]["observed_at"]
    assert "when a node with at least 1 more nvidia.com/gpu joins" in hold["message"]
    assert "needs 3 x 1 nvidia.com/gpu (3 members to place); the cluster has 2 allocatable " \
           "on 2 nodes, room for 2 members even once preemption evicted every pod it may" \
        in hold["message"]


def held(more: list[Any] = (), settings: FoldSettings = ON) -> list[dict[str, Any]]:
    """The gang held at t=11 and the hold applied at t=11.5, then ``more``."""
    return fold_records(gang() + storm() + [ack(11.5, 1, "Applied", None)] + list(more),
                        settings=settings)


def test_gang_held_is_told_when_the_shim_applies_the_hold() -> None:
    out = held()
    told = of(out, "GangHeld")
    assert len(told) == 1
    facts = told[0]["facts"]
    assert facts["since"] == told[0]["observed_at"]
    assert facts["waiting_for"] == "a node with at least 1 more nvidia.com/gpu joins"
    # rounds: one failed round a second from 1 s to 11 s: 11 rounds over 10 s = 66 a minute;
    # Events: the scheduler's FailedScheduling Events of the last minute when the hold was
    # issued, at the shim's record of t=11: those of t=1..10 (the shim's records of the same
    # attempts are not counted again; the Event of t=11 comes after the hold)
    assert facts["rounds_per_minute"] == 66
    assert facts["events_per_minute"] == 10
    assert told[0]["type"] == "Normal"
    assert [i["name"] for i in told[0]["involved"] if i["kind"] == "Pod"] == ["g-0", "g-1", "g-2"]


def test_explain_says_gangstate_holds_the_pod_at_preenqueue() -> None:
    table: dict[str, Any] = {}
    fold_records(gang() + storm() + [ack(11.5, 1, "Applied", None)], settings=ON, table=table)
    why = why_pod(table["ns/g"], "ns/g-0")
    assert (why["held_at"], why["held_by"]) == (
        "PreEnqueue", "gangstate's HoldGang, applied by the scheduler shim")
    assert [r["reason"] for r in why["reasons"]] == ["GangHeld"]
    assert "annotate a member or the PodGroup gangstate.io/hold=off" in why["unblock"][0]


def test_a_node_that_makes_room_releases_the_gang() -> None:
    room_3 = Capacity(GPU, 1000, 3000, 3000, 3, 3, 1000, (), 0, 3)
    out = held([CapacityObserved(at(14), "ns/g", "ns/g-2", room_3)])
    release = of(out, "ReleaseGang")
    assert [(r["id"], r["reason"]) for r in release] == [("ns/g#2", "CapacityChanged")]
    told = of(out, "GangReleased")
    assert told[0]["facts"]["detail"] == \
        "the cluster's nvidia.com/gpu changed (room for 3 of 3 members to place now)"
    assert told[0]["facts"]["held_seconds"] == 2


def test_a_change_that_still_cannot_fit_does_not_release() -> None:
    busier = Capacity(GPU, 1000, 2000, 1000, 2, 1, 1000, (), 0, 2)
    out = held([CapacityObserved(at(14), "ns/g", "ns/g-2", busier)])
    assert of(out, "ReleaseGang") == []


def test_a_member_added_or_min_member_lowered_releases_the_gang() -> None:
    out = held([pod("g-3", 14, min_available="3")])
    assert [(r["reason"]) for r in of(out, "ReleaseGang")] == ["SpecChanged"]
    assert of(out, "GangReleased")[0]["facts"]["detail"] == "its members changed (3 -> 4)"
    # a PodGroup's minMember lowered (Koordinator reads a pod's settings once, at the gang's
    # creation; a PodGroup's on every update: K core/gang.go tryInitByPodGroup)
    members = [podgroup(0, 3)] + [pod(f"g-{i}", 0.1 * i, min_available=None,
                                      waits_for_podgroup=True) for i in range(3)]
    out = fold_records(members + storm() + [ack(11.5, 1, "Applied", None),
                                            podgroup(14, 2, rv="2", type_="MODIFIED")],
                       settings=ON)
    assert of(out, "GangReleased")[0]["facts"]["detail"] == "its minMember changed from 3 to 2"


def test_a_higher_priority_releases_the_gang() -> None:
    higher = ROOM_2._replace(priority=1000)
    out = held([CapacityObserved(at(14), "ns/g", "ns/g-2", higher)])
    assert of(out, "GangReleased")[0]["facts"]["detail"] == "its priority changed from 0 to 1000"


def test_the_hold_is_renewed_and_ends_after_its_longest() -> None:
    # renewals every 10 s of event time after 11 s, up to the end at 11 + 100 s
    out = fold_records(gang() + storm() + [ack(11.5, 1, "Applied", None)], end=115, settings=ON)
    holds = of(out, "HoldGang")
    assert [h["issued_at"] for h in holds][:3] == [t(11), t(21), t(31)]
    assert [h["epoch"] for h in holds] == list(range(1, 11))  # 11, 21, ..., 101
    release = of(out, "ReleaseGang")
    assert [(r["epoch"], r["reason"]) for r in release] == [(11, "HoldExpired")]
    assert len(of(out, "GangHeld")) == 1  # renewals are not told again


def test_a_hold_no_shim_acks_ends_at_its_ttl_and_is_not_issued_again() -> None:
    # TTL 30 s: issued at 11 s, renewed at 21 s and 31 s, no ack; at 41 s (the renewal due
    # after 11 + 30 s) it ends with a ReleaseGang, told to nobody (never applied); the storm
    # goes on and the same facts are not held again
    out = fold_records(gang() + storm() + storm(60)[11:], end=80, settings=ON)
    assert [h["issued_at"] for h in of(out, "HoldGang")] == [t(11), t(21), t(31)]
    release = of(out, "ReleaseGang")
    assert [(r["issued_at"], r["reason"]) for r in release] == [(t(41), "HoldsOff")]
    assert of(out, "GangHeld") == of(out, "GangReleased") == []


def test_a_refused_hold_is_not_issued_again_for_the_same_facts() -> None:
    out = fold_records(gang() + storm() + [
        ack(11.5, 1, "PreconditionFailed", None,
            reason="holds are off in namespace ns (annotation gangstate.io/hold=off)")]
        + storm(30)[11:], settings=ON)
    assert len(of(out, "HoldGang")) == 1
    assert of(out, "GangHeld") == []


def test_a_gang_annotated_off_is_never_held() -> None:
    out = fold_records(gang(hold="off") + storm(), settings=ON)
    assert of(out, "HoldGang") == []


def test_a_gang_preemption_can_make_room_for_is_never_held() -> None:
    evictable = Capacity(GPU, 1000, 4000, 2000, 4, 2, 1000, (), 1000, 4)
    out = fold_records(gang() + storm(capacity=evictable), settings=ON)
    assert of(out, "GangUnschedulable") and of(out, "HoldGang") == []


def test_a_hold_the_restarted_shim_lost_is_renewed_at_once() -> None:
    out = held([failed(20, 200)])
    assert [h["issued_at"] for h in of(out, "HoldGang")] == \
        [t(11), t(20)]


def test_on_random_clusters_a_gang_is_held_only_where_it_cannot_fit() -> None:
    """Clusters of 1 to 4 nodes of 0 to 4 GPUs with pods of priority 0, 10, 1000 bound; a gang
    of 1 to 5 members of 1 or 2 GPUs at one of those priorities. Held exactly where no packing
    of its members exists once every pod it may evict is gone (brute force)."""
    rng = random.Random(24)
    held_count = 0
    for n in range(300):
        cache = NodeCache()
        sizes = [rng.randint(0, 4) for _ in range(rng.randint(1, 4))]
        priority = rng.choice((0, 10, 1000))
        keep = [0] * len(sizes)
        for i, size in enumerate(sizes):
            cache.node("ADDED", node(f"n{i}", size))
            used = 0
            for j in range(rng.randint(0, 3)):
                ask = rng.randint(1, 2)
                if used + ask > size:
                    continue
                used += ask
                prio = rng.choice((0, 10, 1000))
                cache.pod("ADDED", kube_pod(f"p{i}-{j}", uid=f"p{i}-{j}", node=f"n{i}",
                                            gpu=str(ask), priority=prio))
                if prio >= priority:
                    keep[i] += ask * 1000
        members, request = rng.randint(1, 5), rng.randint(1, 2) * 1000
        answer = cache.capacity(GPU, request, (), priority, True)
        assert answer is not None
        capacity = Capacity(**{**answer, "requests": ()})
        gang_id = f"ns/r{n}"
        pods = [pod(f"m-{i}", 0.1, gang=gang_id, min_available=str(members))
                for i in range(members)]
        out = fold_records(pods + [failed(t, t, capacity, "m-0", gang_id)
                                   for t in range(1, 13)], settings=ON)
        fits = packs([request] * members, [s * 1000 - k for s, k in zip(sizes, keep)])
        assert bool(of(out, "HoldGang")) == (not fits), (sizes, keep, members, request)
        held_count += not fits
    assert 50 < held_count < 250, held_count


def test_hold_and_release_commands_keep_the_command_contract() -> None:
    """The commands the shim reads (``gangstate.command/v1``, docs/schemas/command.v1.json)
    accept both: ``HoldGang`` with its ``ttl_seconds`` and ``message``, ``ReleaseGang``."""
    from streams.wire.contracts import Command

    room_3 = Capacity(GPU, 1000, 3000, 3000, 3, 3, 1000, (), 0, 3)
    out = held([CapacityObserved(at(14), "ns/g", "ns/g-2", room_3)])
    commands = [Command.model_validate(o) for o in out if o.get("type") in
                ("HoldGang", "ReleaseGang")]
    assert [(c.type, c.reason, c.epoch, c.ttl_seconds) for c in commands] == [
        ("HoldGang", "GangCannotFit", 1, 30), ("ReleaseGang", "CapacityChanged", 2, None)]
    assert commands[0].message is not None and commands[0].message.startswith(
        "gangstate holds gang ns/g out of the scheduling queue: it cannot fit")


def from_event(t: float, capacity: Capacity = ROOM_2) -> CycleObserved:
    """The watch producer's record of the same failure, derived from the ``FailedScheduling``
    Event: no cycle number, not the shim's, with the room its node cache computed."""
    return CycleObserved(at(t), "koord-scheduler", None, "ns/g-2", "uid-g-2", "ns/g", "ns/g",
                         "Filter", "Unschedulable", "", FIT_ERROR, None, None, f"ev-{t}",
                         "ns/g-2", FIT_ERROR, 2, capacity)


def test_the_room_comes_from_the_events_while_the_shim_reports_the_rounds() -> None:
    """On the real scheduler the shim's records carry no ``capacity``, and the Event-derived
    records that do are set aside while the shim reports (fold.SHIM_PREFERRED_SECONDS): their
    room is still kept, so the gang is held at t=11 s as when the shim's records carried it."""
    shim_only = [failed(s, 100 + s, capacity=None) for s in range(1, 12)]
    assert of(fold_records(gang() + shim_only, settings=ON), "HoldGang") == []
    both = [r for s in range(1, 12) for r in (failed(s, 100 + s, capacity=None),
                                              from_event(s + 0.5))]
    out = fold_records(gang() + both, settings=ON)
    assert [(o["issued_at"], o["reason"]) for o in of(out, "HoldGang")] == [
        (t(11), "GangCannotFit")]
    # the Event-derived records count no round of their own: one GangUnschedulable, at 11 s
    assert [d["observed_at"] for d in of(out, "GangUnschedulable")] == [t(11)]


def shim_record(t: float, cycle: int, member: str, stage: str, status: str,
                reason: str) -> CycleObserved:
    """The shim's record of ``member``'s outcome in cycle ``cycle`` (no culprit)."""
    return CycleObserved(at(t), "koord-scheduler", cycle, f"ns/{member}", f"uid-{member}",
                         "ns/g", "ns/g", stage, status, reason, "", None, None, "", None, None,
                         None, None, "koord-scheduler", cycle)


def test_a_gang_gangstate_holds_is_never_told_its_members_are_stranded() -> None:
    # the bug seen on the cluster-scale bench (stop 35): the pods came one by one, so the gang
    # was briefly held at PreEnqueue by Koordinator (too few), its rounds then failed, gangstate
    # held it, and the shim refused its members at PreEnqueue with reason GangHeld; those
    # refusals are gangstate's own hold (the shim activates the pods when it ends), not
    # Koordinator's, whose stranded members nothing retries: no GangMembersStranded
    settings = replace(ON, stranded_seconds=20, hold_max_seconds=3600)
    rounds = []
    for second in range(1, 12):
        rounds += [shim_record(second, 100 + second, f"g-{i}", "Permit", "Wait", "")
                   for i in range(2)] + [failed(second, 100 + second)]
    refusals = [shim_record(12 + 2 * k + 0.1 * i, 200 + k, f"g-{i}", "PreEnqueue",
                            "UnschedulableAndUnresolvable", "GangHeld")
                for k in range(10) for i in range(3)]
    out = fold_records(gang() + rounds + [ack(11.5, 1, "Applied", None)] + refusals, end=60,
                       settings=settings)
    assert len(of(out, "GangHeld")) == 1
    assert of(out, "GangMembersStranded") == []


def test_no_member_is_stranded_while_gangstate_holds_the_gang() -> None:
    """Rule ST4 (seen live in two clusters: GangMembersStranded ten seconds after GangHeld,
    advising to delete a member of a gang gangstate held itself). Three members refused at
    PreEnqueue, Koordinator's hold ended at 5 s and a round ran at 6 s: stranded 20 s later,
    at 26 s, unless gangstate holds the gang (from 11 s): then none is stranded and nothing
    is due; once gangstate's hold ended (at 40 s) the wait starts again: due at 60 s."""
    from streams.core.rules.stranded import stranded_due, stranded_members
    from streams.core.state import Holding, refused_member

    settings = replace(ON, stranded_seconds=20)
    store: dict[str, Any] = {}
    fold = PartitionFold(store, settings)
    for rec in gang():
        fold.feed("ns/g", rec)
    state = store["ns/g"].copy()
    state.put_members({uid: refused_member(m, at(1)) for uid, m in state.members.items()})
    state.hold = replace(state.hold, held_since=None, released_at=at(5),
                         released_attempted=at(6))
    assert stranded_due(state, settings) == at(26)
    assert stranded_members(state) == ["g-0", "g-1", "g-2"]
    state.holding = Holding(issued_at=at(11), renewed_at=at(11), applied_at=at(12))
    assert stranded_due(state, settings) is None
    assert stranded_members(state) == []
    state.holding = Holding(released_at=at(40))
    assert stranded_due(state, settings) == at(60)
    assert stranded_members(state) == ["g-0", "g-1", "g-2"]
