"""The watch producer's ``gangstate.capacity/v1`` records (``GangRouter._room_changed``): the
room of a gang's short resource told again when a Node or a bound pod changes without an
attempt (docs/contracts.md, "Holding a gang that cannot fit"; docs/watching.md). Values worked
out by hand: nodes of 1 GPU, members asking 1 GPU each."""

from __future__ import annotations

import json
from typing import Any

from producers.watch.watching import Drop, GangRouter, Publish
from streams.core.records import Capacity, CapacityObserved
from streams.core.timefmt import format_time, parse_time
from streams.wire.decoding import Decoded, decode_input
from tests.fixtures.builders import kube_pod

GPU = "nvidia.com/gpu"
T0 = parse_time("2026-11-02T09:00:00Z")
SHORT = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def _t(seconds: float) -> int:
    return T0 + int(seconds * 1_000_000)


def node(name: str, gpu: str = "1", **spec: object) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name}, "spec": dict(spec),
            "status": {"allocatable": {"cpu": "8", GPU: gpu}}}


def failed(name: str, message: str = SHORT, ns: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": f"{name}.fs", "namespace": ns, "uid": f"ev-{name}"},
            "involvedObject": {"kind": "Pod", "namespace": ns, "name": name,
                               "uid": f"uid-{name}"},
            "reason": "FailedScheduling", "type": "Warning", "message": message,
            "reportingComponent": "koord-scheduler"}


def router_with_gang(gang: str = "g", members: int = 3, priority: int | None = None,
                     router: GangRouter | None = None) -> GangRouter:
    """Nodes a and b of 1 GPU (once, for a new router), a pod of another scheduler holding
    a's GPU, and gang ``ns/<gang>`` of ``members`` pods of 1 GPU, none bound."""
    if router is None:
        router = GangRouter()
        router.route("nodes", "ADDED", node("a"), None, 0)
        router.route("nodes", "ADDED", node("b"), None, 0)
        router.route("boundpods", "ADDED", other(), None, 0)
    for i in range(members):
        router.route("pods", "ADDED", kube_pod(f"{gang}-{i}", gang=gang, min_available=members,
                                               gpu="1", priority=priority), None, 0)
    return router


def other(phase: str = "Running", **status: object) -> dict[str, Any]:
    pod = kube_pod("other", "web", scheduler="default-scheduler", node="a", gpu="1",
                   phase=phase)
    pod["status"].update(status)
    return pod


def cycle_of(actions: list[Any]) -> dict[str, Any]:
    (cycle,) = [a.record for a in actions if isinstance(a, Publish)
                and a.record["schema"] == "gangstate.cycle/v1"]
    return cycle


def published(actions: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(a.key, a.record) for a in actions if isinstance(a, Publish)]


def test_a_node_or_a_bound_pod_that_changes_the_room_tells_the_gang() -> None:
    """Gang ns/g of 3 x 1 GPU fails on g-2 with the GPU short: nodes a and b of 1 GPU, a's held
    by a pod of another scheduler (priority 0, as the members: no preemption). The cycle record
    says 2000 allocatable, 1000 free, room 1. Then, without an attempt: the other pod's status
    update changes nothing (no record); node c of 1 GPU joins (3000 / 2000, room 2); c's
    heartbeat changes nothing; the other pod is deleted (3000 / 3000, room 3); c is cordoned
    (2000 / 2000 on 2 nodes, room 2). Each record is keyed by the gang, at the event's time,
    names the culprit of the failure it follows, and decodes to ``CapacityObserved``."""
    router = router_with_gang()
    cycle = cycle_of(router.route("events", "ADDED", failed("g-2"), None, _t(1)))
    base = {"resource": GPU, "request": 1000, "priority": 0}
    assert cycle["capacity"] == {**base, "allocatable": 2000, "free": 1000, "nodes": 2,
                                 "room": 1, "largest": 1000, "room_preempting": 1}

    assert router.route("boundpods", "MODIFIED", other(podIP="10.0.0.7"), None, _t(1.5)) == []
    added = published(router.route("nodes", "ADDED", node("c"), None, _t(2)))
    heartbeat = {**node("c"), "status": {**node("c")["status"], "conditions": [
        {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-11-02T09:00:02Z"}]}}
    assert router.route("nodes", "MODIFIED", heartbeat, None, _t(2.5)) == []
    deleted = published(router.route("boundpods", "DELETED", other(), None, _t(3)))
    cordoned = published(router.route("nodes", "MODIFIED", node("c", unschedulable=True),
                                      None, _t(4)))

    def record(seconds: float, **room: int) -> tuple[str, dict[str, Any]]:
        return ("ns/g", {"schema": "gangstate.capacity/v1", "observed_at": format_time(_t(seconds)),
                         "gang": "ns/g", "culprit": "ns/g-2",
                         "capacity": {**base, "largest": 1000, **room}})

    assert added == [record(2, allocatable=3000, free=2000, nodes=3, room=2, room_preempting=2)]
    assert deleted == [record(3, allocatable=3000, free=3000, nodes=3, room=3,
                              room_preempting=3)]
    assert cordoned == [record(4, allocatable=2000, free=2000, nodes=2, room=2,
                               room_preempting=2)]
    assert added[0][1]["observed_at"] == "2026-11-02T09:00:02.000000Z"
    decoded = decode_input(json.dumps(cordoned[0][1]))
    assert decoded == Decoded("ns/g", CapacityObserved(
        _t(4), "ns/g", "ns/g-2", Capacity(GPU, 1000, 2000, 2000, 2, 2, 1000, (), 0, 2)))


def test_a_node_that_joins_is_room_once_its_not_ready_taint_is_lifted() -> None:
    """Rule CAP1. Node c of 1 GPU joins as the API server's TaintNodesByCondition admission
    creates every Node: tainted ``node.kubernetes.io/not-ready:NoSchedule``, which the members
    (with the default NoExecute tolerations of not-ready and unreachable) do not tolerate: the
    room stays 1 and nothing is told. kube-controller-manager lifts the taint once c is Ready:
    3000 allocatable, 2000 free on 3 nodes, room 2. Before CAP1 the gang was told room 2 at the
    join (seen on the real scheduler: a gang held on 2 GPUs was released at once and failed its
    next round on the tainted node)."""
    router = router_with_gang()
    router.route("events", "ADDED", failed("g-2"), None, _t(1))
    not_ready = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    assert published(router.route("nodes", "ADDED", node("c", taints=not_ready),
                                  None, _t(2))) == []
    lifted = published(router.route("nodes", "MODIFIED", node("c", taints=[]), None, _t(3)))
    assert [(key, r["observed_at"], r["capacity"]) for key, r in lifted] == [
        ("ns/g", format_time(_t(3)), {"resource": GPU, "request": 1000, "priority": 0,
                                      "allocatable": 3000, "free": 2000, "nodes": 3,
                                      "room": 2, "largest": 1000, "room_preempting": 2})]
    # a member that tolerates the taint is told at the join
    router = GangRouter()
    for name in ("a", "b"):
        router.route("nodes", "ADDED", node(name), None, 0)
    router.route("boundpods", "ADDED", other(), None, 0)
    for i in range(3):
        pod = kube_pod(f"t-{i}", gang="t", min_available=3, gpu="1")
        pod["spec"]["tolerations"] = [{"key": "node.kubernetes.io/not-ready",
                                       "operator": "Exists", "effect": "NoSchedule"}]
        router.route("pods", "ADDED", pod, None, 0)
    router.route("events", "ADDED", failed("t-2"), None, _t(1))
    joined = published(router.route("nodes", "ADDED", node("c", taints=not_ready), None, _t(2)))
    assert [r["capacity"]["room"] for _, r in joined] == [2]


def test_a_refused_member_is_told_the_room_of_its_culprit() -> None:
    """g-0 refused at PreFilter because g-2 did not fit (B2): the record names g-2, whose
    request counts; a second gang told the same room is told in gang order."""
    router = router_with_gang()
    router_with_gang("h", members=2, router=router)
    router.route("events", "ADDED", failed("g-0", (
        '0/2 nodes are available: GangGroup "ns/g" gets rejected due to member Pod "ns/g-2" is '
        'unschedulable with reason "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", '
        'alreadyWaitForBound: 0.')), None, _t(1))
    router.route("events", "ADDED", failed("h-1"), None, _t(1))
    out = published(router.route("nodes", "ADDED", node("c"), None, _t(2)))
    assert [(key, r["culprit"], r["capacity"]["room"]) for key, r in out] == [
        ("ns/g", "ns/g-2", 2), ("ns/h", "ns/h-1", 2)]


def test_only_gangs_whose_attempt_carried_a_room_are_told_and_a_bind_ends_it() -> None:
    """A gang whose failure names no short resource (taints) is told nothing; a gang whose
    member was bound (``Scheduled``) is told no more."""
    router = router_with_gang()
    router.route("events", "ADDED", failed(
        "g-2", "0/2 nodes are available: 2 node(s) had untolerated taint(s)."), None, _t(1))
    assert router.rooms == {}
    assert router.route("nodes", "ADDED", node("c"), None, _t(2)) == []
    router.route("events", "ADDED", {**failed("g-1"), "metadata": {
        "name": "g-1.fs2", "namespace": "ns", "uid": "ev-g-1-2"}}, None, _t(3))
    assert list(router.rooms) == ["ns/g"]
    router.route("events", "ADDED", {
        **failed("g-0", "Successfully assigned ns/g-0 to c"), "reason": "Scheduled",
        "type": "Normal", "metadata": {"name": "g-0.s", "namespace": "ns", "uid": "ev-s"}},
        None, _t(4))
    assert router.rooms == {}
    assert router.route("nodes", "ADDED", node("d"), None, _t(5)) == []


def test_a_gang_whose_room_cannot_be_computed_or_that_is_gone_is_forgotten() -> None:
    """Gang ns/g's culprit g-2 is deleted: the next node change tells nothing and forgets the
    gang (its room no longer computable). Gang ns/h: all its pods deleted, and forgotten 600 s
    later (``remember_deleted``): the gang leaves ``rooms`` at once, without a node change."""
    router = router_with_gang()
    router_with_gang("h", members=1, router=router)
    router.route("events", "ADDED", failed("g-2"), None, _t(1))
    router.route("events", "ADDED", failed("h-0"), None, _t(1))
    assert sorted(router.rooms) == ["ns/g", "ns/h"]
    router.route("pods", "DELETED", kube_pod("g-2", gang="g", min_available=3, gpu="1"),
                 None, _t(2))
    out = published(router.route("nodes", "ADDED", node("c"), None, _t(3)))
    assert [key for key, _ in out] == ["ns/h"]
    assert list(router.rooms) == ["ns/h"]
    router.route("pods", "DELETED", kube_pod("h-0", gang="h", min_available=1, gpu="1"),
                 None, _t(4))
    router.expire(_t(4 + 600))
    assert router.rooms == {}


def test_a_record_the_contract_refuses_is_dropped_with_its_reason() -> None:
    """A culprit whose priority is outside int32 (no API server admits it; bad input all
    the same): the capacity record fails ``CapacityRecord`` (priority <= 2**31 - 1), so it is
    dropped as ``capacity-invalid`` naming the field, and the gang forgotten."""
    router = router_with_gang(priority=2**31)
    router.route("events", "ADDED", failed("g-2"), None, _t(1))
    (drop,) = router.route("nodes", "ADDED", node("c"), None, _t(2))
    assert drop == Drop("capacity-invalid")
    assert drop.detail.startswith("gang ns/g: capacity.priority: ")
    assert router.rooms == {}


def test_the_record_releases_a_held_gang_through_the_fold() -> None:
    """The whole way: the gang of ``test_holding`` (3 x 1 GPU, 2 nodes of 1 GPU, nothing bound)
    held at t=11 s and applied at 11.5 s; the router, told the same failure at 1 s, sees node c
    of 1 GPU join at 14 s. Its record, decoded, is the ``room_3`` of ``test_holding``
    (3000 / 3000 on 3 nodes, room 3, room_preempting 3) and releases the gang
    (``ReleaseGang`` ``CapacityChanged``)."""
    from tests.fixtures.builders import at
    from tests.unit.test_holding import held, of

    router = GangRouter()
    router.route("nodes", "ADDED", node("a"), None, 0)
    router.route("nodes", "ADDED", node("b"), None, 0)
    router_with_gang(router=router)
    router.route("events", "ADDED", failed("g-2"), None, at(1))
    ((key, record),) = published(router.route("nodes", "ADDED", node("c"), None, at(14)))
    decoded = decode_input(json.dumps(record))
    assert decoded == Decoded("ns/g", CapacityObserved(
        at(14), "ns/g", "ns/g-2", Capacity(GPU, 1000, 3000, 3000, 3, 3, 1000, (), 0, 3)))
    out = held([decoded.record])
    assert [(r["id"], r["reason"]) for r in of(out, "ReleaseGang")] == [
        ("ns/g#2", "CapacityChanged")]
