"""The watcher's lean per-node cache (``producers/node_cache.py``): capacity facts by hand."""

from __future__ import annotations

from producers.watch.node_cache import NodeCache
from streams.core.capacity import Toleration
from tests.fixtures.builders import kube_pod

GPU = "nvidia.com/gpu"


def node(name: str, cpu: str, gpu: str = "0", **spec: object) -> dict:
    return {"kind": "Node", "metadata": {"name": name}, "spec": dict(spec),
            "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", GPU: gpu}}}


def pod(uid: str, node_name: str | None, cpu: str = "0", gpu: str = "0",
        phase: str = "Pending") -> dict:
    return kube_pod(uid, uid=uid, node=node_name, cpu=cpu, gpu=gpu, phase=phase)


def test_capacity_counts_bound_unfinished_pods_on_schedulable_nodes() -> None:
    cache = NodeCache()
    assert cache.capacity(GPU, 1000) is None  # nothing known yet
    cache.node("ADDED", node("a", "8", gpu="4"))
    cache.node("ADDED", node("b", "8", gpu="2", taints=[{"key": "x", "effect": "NoSchedule"}]))
    cache.node("ADDED", node("c", "8", gpu="8", unschedulable=True))
    cache.pod("ADDED", pod("p1", "a", gpu="3"))          # a: 1 GPU free
    cache.pod("ADDED", pod("p2", "b", gpu="1"))          # b: 1 GPU free
    cache.pod("ADDED", pod("p3", None, gpu="2"))         # not bound: holds nothing
    cache.pod("ADDED", pod("p4", "a", gpu="1", phase="Succeeded"))  # finished: holds nothing
    # a member tolerating x (b's taint): a and b; c is cordoned
    x = (Toleration("x", "Exists", "", ""),)
    assert cache.capacity(GPU, 1000, tolerations=x) == {
        "resource": GPU, "request": 1000, "allocatable": 6000, "free": 2000, "nodes": 2,
        "room": 2, "largest": 4000}
    # a member without tolerations: a only (1 of its 4 GPUs free)
    assert cache.capacity(GPU, 1000) == {
        "resource": GPU, "request": 1000, "allocatable": 4000, "free": 1000, "nodes": 1,
        "room": 1, "largest": 4000}
    # a member of 2 GPUs: 2 free in all, but 1 on each node: no room
    assert cache.capacity(GPU, 2000, tolerations=x)["room"] == 0
    # p1 finishes, node b goes away
    cache.pod("MODIFIED", pod("p1", "a", gpu="3", phase="Succeeded"))
    cache.node("DELETED", node("b", "8"))
    assert cache.capacity(GPU, 2000) == {
        "resource": GPU, "request": 2000, "allocatable": 4000, "free": 4000, "nodes": 1,
        "room": 2, "largest": 4000}


def test_nodes_counts_the_schedulable_nodes_that_have_the_resource() -> None:
    """Two GPU nodes of 1 GPU (a, b), a CPU node (cpu: allocatable nvidia.com/gpu 0) and one
    whose allocatable names no GPU at all (bare), all schedulable, 8 cpu each: for a GPU the
    cluster has 2 allocatable on 2 nodes (before: "on 4 nodes", the CPU-only ones counted);
    for cpu every node has some: 32 cpu on 4 nodes."""
    cache = NodeCache()
    cache.node("ADDED", node("a", "8", gpu="1"))
    cache.node("ADDED", node("b", "8", gpu="1"))
    cache.node("ADDED", node("cpu", "8"))
    cache.node("ADDED", {"kind": "Node", "metadata": {"name": "bare"}, "spec": {},
                         "status": {"allocatable": {"cpu": "8", "memory": "32Gi"}}})
    assert cache.capacity(GPU, 1000) == {
        "resource": GPU, "request": 1000, "allocatable": 2000, "free": 2000, "nodes": 2,
        "room": 2, "largest": 1000}
    assert cache.capacity("cpu", 4000) == {
        "resource": "cpu", "request": 4000, "allocatable": 32000, "free": 32000, "nodes": 4,
        "room": 8, "largest": 8000}


def test_malformed_quantities_make_no_node_and_no_request() -> None:
    cache = NodeCache()
    cache.node("ADDED", node("a", "lots"))
    assert cache.nodes == {}
    cache.node("ADDED", node("a", "8"))
    cache.pod("ADDED", pod("p1", "a", cpu="many"))
    assert cache.bound == {}
    assert cache.capacity("cpu", 1000)["free"] == 8000


def test_the_router_attaches_the_room_of_the_culprits_short_resource() -> None:
    """A failure whose culprit's fit error is Insufficient nvidia.com/gpu carries the node
    cache's room for the culprit's request (1 GPU); an Event about another reason carries
    none."""
    from producers.watch.watching import GangRouter, Publish

    router = GangRouter()
    router.route("nodes", "ADDED", node("a", "8", gpu="1"), None, 0)
    router.route("nodes", "ADDED", node("b", "8", gpu="1"), None, 0)
    ann = {"gang.scheduling.koordinator.sh/name": "g",
           "gang.scheduling.koordinator.sh/min-available": "3"}
    for i in range(3):
        member = pod(f"uid-{i}", None, gpu="1")
        member["metadata"].update({"name": f"g-{i}", "namespace": "ns", "annotations": ann,
                                   "resourceVersion": "1"})
        member["spec"]["schedulerName"] = "koord-scheduler"
        router.route("pods", "ADDED", member, None, 0)

    def failed(name: str, message: str) -> dict:
        actions = router.route("events", "ADDED", {
            "metadata": {"name": f"{name}.1", "namespace": "ns", "uid": f"ev-{name}"},
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": name,
                               "uid": f"uid-{name[-1]}"},
            "reason": "FailedScheduling", "message": message, "type": "Warning",
            "reportingComponent": "koord-scheduler"}, None, 1_000_000)
        (cycle,) = [a.record for a in actions if isinstance(a, Publish)
                    and a.record["schema"] == "gangstate.cycle/v1"]
        return cycle

    own = failed("g-2", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
    assert own["capacity"] == {"resource": GPU, "request": 1000, "allocatable": 2000,
                               "free": 2000, "nodes": 2, "room": 2, "largest": 1000,
                               "priority": 0, "room_preempting": 2}
    refused = failed("g-0", '0/2 nodes are available: GangGroup "ns/g" gets rejected due to '
                            'member Pod "ns/g-2" is unschedulable with reason "0/2 nodes are '
                            'available: 2 Insufficient nvidia.com/gpu.", alreadyWaitForBound: 0.')
    assert refused["capacity"] == own["capacity"]  # the culprit's (g-2's) request
    taints = failed("g-1", "0/2 nodes are available: 2 node(s) had untolerated taint(s).")
    assert "capacity" not in taints


def test_a_node_without_status_yet_is_no_node() -> None:
    """A Node created before its status was patched (no ``status.allocatable``; KWOK and the
    kubelet patch it after) is not counted: 2 nodes of 1 GPU stay "2 allocatable on 2 nodes",
    not "on 3"; once its status has allocatable it counts."""
    cache = NodeCache()
    cache.node("ADDED", node("a", "8", gpu="1"))
    cache.node("ADDED", node("b", "8", gpu="1"))
    bare = {"kind": "Node", "metadata": {"name": "c"}, "spec": {}}
    cache.node("ADDED", bare)
    cache.node("MODIFIED", {**bare, "status": {"conditions": []}})
    assert (cache.capacity(GPU, 1000)["allocatable"], cache.capacity(GPU, 1000)["nodes"]) == (
        2000, 2)
    cache.node("MODIFIED", node("c", "8", gpu="1"))
    assert (cache.capacity(GPU, 1000)["allocatable"], cache.capacity(GPU, 1000)["nodes"]) == (
        3000, 3)


def test_a_heterogeneous_gang_carries_the_requests_of_its_members_to_place() -> None:
    """Members asking 2, 1 and 1 GPU (g-0, g-1, g-2, none bound) on nodes of 2 and 1 GPU:
    the record carries ``requests`` [2000, 1000, 1000] (largest first) and ``room`` 2 (first
    fit decreasing: 2 on a, 1 on b, the last 1 nowhere), whichever member is the culprit;
    once g-1 is bound, the members to place are g-0 and g-2 (2000, 1000)."""
    from producers.watch.watching import GangRouter, Publish

    router = GangRouter()
    router.route("nodes", "ADDED", node("a", "8", gpu="2"), None, 0)
    router.route("nodes", "ADDED", node("b", "8", gpu="1"), None, 0)
    ann = {"gang.scheduling.koordinator.sh/name": "g",
           "gang.scheduling.koordinator.sh/min-available": "3"}
    members = []
    for i, gpu in enumerate(("2", "1", "1")):
        member = pod(f"uid-{i}", None, gpu=gpu)
        member["metadata"].update({"name": f"g-{i}", "namespace": "ns", "annotations": ann,
                                   "resourceVersion": "1"})
        member["spec"]["schedulerName"] = "koord-scheduler"
        members.append(member)
        router.route("pods", "ADDED", member, None, 0)

    def capacity(name: str, count: int = 1) -> dict:
        actions = router.route("events", "ADDED", {
            "metadata": {"name": f"{name}.{count}", "namespace": "ns",
                         "uid": f"ev-{name}-{count}"},
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": name,
                               "uid": f"uid-{name[-1]}"},
            "reason": "FailedScheduling", "type": "Warning",
            "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
            "reportingComponent": "koord-scheduler"}, None, 1_000_000)
        (cycle,) = [a.record for a in actions if isinstance(a, Publish)
                    and a.record["schema"] == "gangstate.cycle/v1"]
        return cycle["capacity"]

    assert capacity("g-0") == {"resource": GPU, "request": 2000, "allocatable": 3000,
                               "free": 3000, "nodes": 2, "room": 2, "largest": 2000,
                               "requests": [2000, 1000, 1000], "priority": 0,
                               "room_preempting": 2}
    assert capacity("g-2")["requests"] == [2000, 1000, 1000]
    bound = {**members[1], "spec": {**members[1]["spec"], "nodeName": "b"},
             "metadata": {**members[1]["metadata"], "resourceVersion": "2"}}
    router.route("pods", "MODIFIED", bound, members[1], 2_000_000)
    router.route("boundpods", "MODIFIED", bound, members[1], 2_000_000)
    # b is full now: 2 -> a, 1 nowhere
    assert {k: v for k, v in capacity("g-2", 2).items() if k in ("room", "requests")} == {
        "room": 1, "requests": [2000, 1000]}


def test_room_preempting_counts_only_pods_of_lower_priority() -> None:
    """Rule PR4, the wasted preemption found on the real scheduler: 2 nodes of 1 GPU, each held
    by a pod of priority 10; a member of priority 1000 asking 1 GPU has no room now and room
    for 2 once both low-priority pods are evicted. A member of priority 10 may evict neither
    (not lower), one of priority 11 both; a third node's GPU held at priority 2000 never
    counts. A member with preemptionPolicy Never evicts nothing: no room_preempting."""
    cache = NodeCache()
    for name in ("a", "b", "c"):
        cache.node("ADDED", node(name, "8", gpu="1"))
    cache.pod("ADDED", kube_pod("low-a", uid="low-a", node="a", gpu="1", priority=10))
    cache.pod("ADDED", kube_pod("low-b", uid="low-b", node="b", gpu="1", priority=10))
    cache.pod("ADDED", kube_pod("top-c", uid="top-c", node="c", gpu="1", priority=2000))
    cache.pod("ADDED", kube_pod("cpu-a", uid="cpu-a", node="a", cpu="1"))  # no GPU: no matter
    base = {"resource": GPU, "request": 1000, "allocatable": 3000, "free": 0, "nodes": 3,
            "room": 0, "largest": 1000}
    assert cache.capacity(GPU, 1000, priority=1000) == {
        **base, "priority": 1000, "room_preempting": 2}
    assert cache.capacity(GPU, 1000, priority=10)["room_preempting"] == 0
    assert cache.capacity(GPU, 1000, priority=11)["room_preempting"] == 2
    assert cache.capacity(GPU, 1000, priority=1000, preempts=False) == {
        **base, "priority": 1000, "room_preempting": None}
    assert cache.capacity(GPU, 1000) == base  # no priority asked: the facts as before
    # a member of 2 GPUs: evicting the low pods frees 1 GPU on each of a and b, never 2 on one
    assert cache.capacity(GPU, 2000, priority=1000)["room_preempting"] == 0
    # low-a finishes: a is free now (room 1), b still needs evicting (room_preempting 2)
    cache.pod("MODIFIED", kube_pod("low-a", uid="low-a", node="a", gpu="1", priority=10,
                                   phase="Succeeded"))
    assert {k: cache.capacity(GPU, 1000, priority=1000)[k]
            for k in ("room", "room_preempting")} == {"room": 1, "room_preempting": 2}


def test_the_router_reads_the_culprits_priority_and_preemption_policy() -> None:
    """The cycle record of a gang member of priority 1000 short of a GPU carries its priority
    and room_preempting (2 GPUs held by a pod of priority 10 on node a); the same member with
    preemptionPolicy Never carries its priority and room_preempting null."""
    from producers.watch.watching import GangRouter, Publish

    def capacity(policy: str | None) -> dict:
        router = GangRouter()
        router.route("nodes", "ADDED", node("a", "8", gpu="2"), None, 0)
        router.route("boundpods", "ADDED", kube_pod("low", uid="low", node="a", gpu="2",
                                                    priority=10), None, 0)
        member = kube_pod("g-0", gang="g", min_available=1, gpu="1", priority=1000,
                          preemption_policy=policy)
        router.route("pods", "ADDED", member, None, 0)
        actions = router.route("events", "ADDED", {
            "metadata": {"name": "g-0.1", "namespace": "ns", "uid": "ev-g-0"},
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "g-0",
                               "uid": "uid-g-0"},
            "reason": "FailedScheduling", "type": "Warning",
            "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
            "reportingComponent": "koord-scheduler"}, None, 1_000_000)
        (cycle,) = [a.record for a in actions if isinstance(a, Publish)
                    and a.record["schema"] == "gangstate.cycle/v1"]
        return {k: cycle["capacity"][k] for k in ("room", "priority", "room_preempting")}

    assert capacity(None) == {"room": 0, "priority": 1000, "room_preempting": 2}
    assert capacity("PreemptLowerPriority") == {"room": 0, "priority": 1000, "room_preempting": 2}
    assert capacity("Never") == {"room": 0, "priority": 1000, "room_preempting": None}


def test_node_and_pod_tell_whether_what_the_cache_keeps_changed() -> None:
    """What the router recomputes the rooms on: a Node's heartbeat (a new condition) or a
    bound pod's status update (an IP) changes nothing the cache keeps (False, the answers
    kept); a new Node, a resized one, a cordon, a pod bound, finished or deleted do (True).
    A DELETED of what was never kept changes nothing."""
    cache = NodeCache()
    assert cache.node("ADDED", node("a", "8", gpu="2")) is True
    beat = node("a", "8", gpu="2")
    beat["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert cache.node("MODIFIED", beat) is False
    assert cache.capacity(GPU, 1000)["room"] == 2
    kept = cache._answers.copy()
    assert cache.node("SYNC", node("a", "8", gpu="2")) is False
    assert cache._answers == kept  # nothing changed: the answers are kept
    assert cache.pod("ADDED", pod("p1", "a", gpu="1")) is True
    running = pod("p1", "a", gpu="1", phase="Running")
    running["status"]["podIP"] = "10.0.0.7"
    assert cache.pod("MODIFIED", running) is False  # still bound, same requests
    assert cache.capacity(GPU, 1000)["room"] == 1
    assert cache.pod("MODIFIED", pod("p1", "a", gpu="1", phase="Succeeded")) is True
    assert cache.pod("DELETED", pod("p1", "a", gpu="1")) is False  # finished: kept nothing
    assert cache.node("MODIFIED", node("a", "8", gpu="4")) is True
    assert cache.node("MODIFIED", node("a", "8", gpu="4", unschedulable=True)) is True
    assert cache.capacity(GPU, 1000)["nodes"] == 0
    assert cache.node("DELETED", node("zz", "8")) is False
    assert cache.node("DELETED", node("a", "8")) is True
    assert cache.capacity(GPU, 1000) is None


def test_the_sums_kept_per_node_agree_with_the_bound_pods_counted_anew() -> None:
    """The cache keeps each node's requested amounts as sums updated per pod change. After
    every step of 400 random Node and Pod events (nodes added, resized, cordoned, deleted;
    pods bound, moved, finished, deleted, at priorities 0, 10 and 1000), every answer equals
    the one computed from scratch: each node's room from the pods bound to it
    (``capacity.node_room``), ``shortfall`` and ``room_after_preempting`` over them."""
    import random

    from streams.core.capacity import node_room, room_after_preempting, shortfall

    rng = random.Random(25)
    cache = NodeCache()
    nodes: dict[str, dict] = {}
    pods: dict[str, dict] = {}
    for step in range(400):
        roll = rng.random()
        if roll < 0.15 or not nodes:
            name = f"n{rng.randrange(12)}"
            if name in nodes and rng.random() < 0.3:
                cache.node("DELETED", nodes.pop(name))
            else:
                nodes[name] = node(name, str(rng.choice((8, 16))), gpu=str(rng.choice((1, 4, 8))),
                                   unschedulable=rng.random() < 0.1)
                cache.node("MODIFIED", nodes[name])
        else:
            uid = f"p{rng.randrange(40)}"
            if uid in pods and rng.random() < 0.2:
                cache.pod("DELETED", pods.pop(uid))
                continue
            pods[uid] = kube_pod(uid, uid=uid, node=rng.choice(sorted(nodes) + [None]),
                                 gpu=str(rng.choice((0, 1, 2))), cpu="1",
                                 phase=rng.choice(("Running", "Running", "Succeeded")),
                                 priority=rng.choice((0, 10, 1000)))
            cache.pod("MODIFIED", pods[uid])
        held = {uid: p for uid, p in pods.items()
                if p["spec"].get("nodeName") and p["status"]["phase"] != "Succeeded"}
        rooms = sorted((node_room(n, [p["spec"] for p in held.values()
                                      if p["spec"]["nodeName"] == name])
                        for name, n in nodes.items()), key=lambda r: r.name)
        for request, priority in ((1000, 1000), (2000, 10), (8000, 0)):
            got = cache.capacity(GPU, request, (), priority)
            if not rooms:
                assert got is None, step
                continue
            s = shortfall(GPU, request, 0, 0, rooms, ())
            usable = [r for r in rooms if not r.unschedulable]
            lower = [sum(int(p["spec"]["containers"][0]["resources"]["requests"].get(GPU, 0))
                         * 1000 for p in held.values()
                         if p["spec"]["nodeName"] == r.name
                         and p["spec"].get("priority", 0) < priority) for r in usable]
            assert got == {"resource": GPU, "request": request, "allocatable": s.allocatable,
                           "free": s.free, "nodes": s.nodes, "room": s.room,
                           "largest": s.largest, "priority": priority,
                           "room_preempting": room_after_preempting(
                               request, [], [r.free(GPU) for r in usable], lower)}, step
