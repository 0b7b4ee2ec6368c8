"""The shortfall of a gang that cannot fit (``streams/core/capacity.py``), values by hand."""

from __future__ import annotations

import pytest

from streams.core.capacity import (NodeRoom, Taint, Toleration, format_quantity, node_room,
                                   parse_quantity, pod_requests, shortfall, shortfall_text,
                                   tolerations_of)

GPU = "nvidia.com/gpu"


@pytest.mark.parametrize("text,milli", [
    ("100m", 100), ("1", 1000), ("2.5", 2500), ("64Mi", 64 * 2**20 * 1000),
    ("1Gi", 2**30 * 1000), ("1k", 1_000_000), ("1e3", 1_000_000), ("0.1m", 1),  # rounded up
    ("1500u", 2), ("8", 8000), (".5", 500),
])
def test_quantities_in_milli_units(text: str, milli: int) -> None:
    assert parse_quantity(text) == milli


@pytest.mark.parametrize("text", ["", "abc", "1X", "1 Gi", "--1"])
def test_bad_quantities(text: str) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(text)


def test_pod_requests_follow_the_init_container_rule() -> None:
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                       {"resources": {"requests": {"cpu": "250m"}}}],
        "initContainers": [
            # a sidecar: adds 100m to the containers' sum and runs beside later init containers
            {"restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
            # a plain init container of 2 cpu: while it runs, 2 + 0.1 (the sidecar) = 2.1 cpu
            {"resources": {"requests": {"cpu": "2", "memory": "512Mi"}}},
        ],
        "overhead": {"cpu": "50m"},
    }
    # cpu: max(0.5 + 0.25 + 0.1, 2.1) + 0.05 = 2.15; memory: max(1Gi, 512Mi) = 1Gi
    assert pod_requests(spec) == {"cpu": 2150, "memory": 2**30 * 1000}
    assert pod_requests({"containers": [{"name": "c"}]}) == {}


def nodes_of_the_recording() -> list[NodeRoom]:
    """The recording's cluster: 2 nodes of 8 cpu, 32Gi, 1 GPU; nothing bound."""
    node = {"status": {"allocatable": {"cpu": "8", "memory": "32Gi", GPU: "1", "pods": "110"}}}
    return [node_room({**node, "metadata": {"name": n}}, []) for n in ("node-a", "node-b")]


def test_gpu_short_needs_three_gpus_and_the_cluster_has_two() -> None:
    s = shortfall(GPU, parse_quantity("1"), min_member=3, bound=0,
                  nodes=nodes_of_the_recording())
    assert (s.needed, s.allocatable, s.free, s.nodes, s.room, s.missing_members, s.never_fits) \
        == (3, 2000, 2000, 2, 2, 1, False)
    assert shortfall_text(s) == (
        "needs 3 x 1 nvidia.com/gpu (3 members to place); the cluster has 2 allocatable on 2 "
        "nodes, room for 2 members now: freeing capacity cannot make room, it takes a new node "
        "(at least 1 nvidia.com/gpu more), or min-available would have to drop to 2")


def test_a_member_larger_than_any_node_never_fits() -> None:
    s = shortfall("cpu", parse_quantity("100"), min_member=2, bound=0,
                  nodes=nodes_of_the_recording())
    assert s.never_fits and s.largest == 8000
    assert shortfall_text(s) == (
        "needs 2 x 100 cpu (2 members to place); the cluster has 16 allocatable on "
        "2 nodes: one member's 100 is more than any node has allocatable (at most 8), so it "
        "can never fit")


def test_free_room_is_counted_node_by_node_and_unschedulable_nodes_are_left_out() -> None:
    """Nodes a (8 cpu, 5 requested), b (3 cpu), c (64 cpu, cordoned) and d (1 cpu, tainted
    ``dedicated=ml:NoSchedule`` and ``soft:PreferNoSchedule``); a gang of minMember 4 with 1
    bound asks 2 cpu a member. A member without tolerations may go to a and b only: 11 cpu
    allocatable, 6 free, room 1 + 1 = 2 of the 3 to place. Tolerating the taint adds d (1 cpu
    more, no room for 2 cpu); tolerating every taint (``Exists`` without a key) adds the
    cordoned c too (NodeUnschedulable lets such a pod on): room 2 + 32."""
    bound = [{"containers": [{"resources": {"requests": {"cpu": "5"}}}]}]
    nodes = [
        # 8 cpu, 5 requested: 3 free -> one member of 2 cpu
        node_room({"metadata": {"name": "a"}, "status": {"allocatable": {"cpu": "8"}}}, bound),
        # 3 cpu free -> one member of 2 cpu (3 + 3 = 6 free in all, yet room for 2, not 3)
        node_room({"metadata": {"name": "b"}, "status": {"allocatable": {"cpu": "3"}}}, []),
        node_room({"metadata": {"name": "c"}, "spec": {"unschedulable": True},
                   "status": {"allocatable": {"cpu": "64"}}}, []),
        node_room({"metadata": {"name": "d"}, "spec": {"taints": [
            {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
            {"key": "soft", "effect": "PreferNoSchedule"}]},
            "status": {"allocatable": {"cpu": "1"}}}, []),
    ]
    assert [t.text() for t in nodes[3].taints] == ["dedicated=ml:NoSchedule"]
    s = shortfall("cpu", 2000, min_member=4, bound=1, nodes=nodes)
    assert (s.needed, s.allocatable, s.free, s.nodes, s.room, s.missing_members) == \
        (3, 11000, 6000, 2, 2, 1)
    assert shortfall_text(s).endswith(
        "room for 2 members now: 2 cpu more must free up (1 member's worth, each on one node), "
        "held by other pods, or min-available would have to drop to 3")
    ml = tolerations_of({"tolerations": [{"key": "dedicated", "operator": "Equal",
                                          "value": "ml", "effect": "NoSchedule"}]})
    s = shortfall("cpu", 2000, min_member=4, bound=1, nodes=nodes, tolerations=ml)
    assert (s.allocatable, s.free, s.nodes, s.room) == (12000, 7000, 3, 2)
    everything = tolerations_of({"tolerations": [{"operator": "Exists"}]})
    s = shortfall("cpu", 2000, min_member=4, bound=1, nodes=nodes, tolerations=everything)
    assert (s.allocatable, s.free, s.nodes, s.room, s.missing_members) == \
        (76000, 71000, 4, 34, 0)


def test_a_toleration_matches_a_taint_as_kubernetes_does() -> None:
    """k8s.io/api v0.35.2 core/v1/toleration.go:52-77: the effect (empty: any), the key (empty
    with Exists: any), then Equal (or no operator) compares values, Exists does not; Lt/Gt
    (alpha gate off by default) and unknown operators match nothing."""
    taint = Taint("node.kubernetes.io/not-ready", "", "NoSchedule")
    dedicated = Taint("dedicated", "ml", "NoExecute")
    cases = [
        (Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoSchedule"), taint, True),
        (Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"), taint, False),
        (Toleration("node.kubernetes.io/not-ready", "Exists", "", ""), taint, True),
        (Toleration("", "Exists", "", ""), dedicated, True),
        (Toleration("dedicated", "", "ml", ""), dedicated, True),
        (Toleration("dedicated", "Equal", "gpu", ""), dedicated, False),
        (Toleration("dedicated", "Equal", "", ""), dedicated, False),
        (Toleration("other", "Exists", "", ""), dedicated, False),
        (Toleration("dedicated", "Gt", "1", ""), dedicated, False),
    ]
    assert [t.tolerates(taint_) for t, taint_, _ in cases] == [want for *_, want in cases]
    # the default tolerations the API server adds (DefaultTolerationSeconds: not-ready and
    # unreachable, NoExecute, 300 s) do not let a pod onto a node that just joined
    defaults = tolerations_of({"tolerations": [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300}]})
    joined = NodeRoom("new", {"cpu": 8000}, {}, False, (taint,))
    assert not joined.admits(defaults)
    assert joined._replace(taints=()).admits(defaults)
    assert not joined._replace(taints=(), unschedulable=True).admits(defaults)


def test_enough_room() -> None:
    s = shortfall(GPU, 1000, min_member=2, bound=0, nodes=nodes_of_the_recording())
    assert s.missing_members == 0
    assert shortfall_text(s).endswith("room for 2 now: enough")


@pytest.mark.parametrize("resource,milli,text", [
    ("cpu", 500, "500m"), ("cpu", 2000, "2"), ("memory", 64 * 2**20 * 1000, "64Mi"),
    ("memory", 3 * 2**29 * 1000, "1.5Gi"), (GPU, 3000, "3"), (GPU, 500, "0.5"),
])
def test_format_quantity(resource: str, milli: int, text: str) -> None:
    assert format_quantity(resource, milli) == text
