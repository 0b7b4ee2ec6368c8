"""The shortfall of a gang that cannot fit (``streams/core/capacity.py``), values by hand."""

from __future__ import annotations

import pytest

from streams.core.capacity import (NodeRoom, format_quantity, node_room, parse_quantity,
                                   pod_requests, shortfall, shortfall_text)

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
    assert nodes[3].taints == ("dedicated=ml:NoSchedule",)
    s = shortfall("cpu", 2000, min_member=4, bound=1, nodes=nodes)
    assert (s.needed, s.allocatable, s.free, s.nodes, s.room, s.missing_members) == \
        (3, 12000, 7000, 3, 2, 1)
    assert shortfall_text(s).endswith(
        "room for 2 members now: 2 cpu more must free up (1 member's worth, each on one node), "
        "held by other pods, or min-available would have to drop to 3")


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
