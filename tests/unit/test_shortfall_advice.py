"""Shortfalls of heterogeneous gangs, advice of the right kind, and no warning from facts that
are not news (``streams.core.capacity``, ``episode.unblock_text``, ``decide.unschedulable_due``),
as named scenarios with the values worked out by hand. Amounts in milli-units (1 GPU = 1000).
"""

from __future__ import annotations

from typing import Any

import pytest

from streams.core.capacity import NodeRoom, first_fit, shortfall, shortfall_text
from streams.core.episode import unblock_text
from streams.core.records import Capacity
from streams.core.timefmt import parse_time
from tests.fixtures.builders import at, attempt, fold_records, pod

GPU = "nvidia.com/gpu"


def gpus(name: str, allocatable: int, held: int = 0) -> NodeRoom:
    """A node of ``allocatable`` GPUs of which other pods hold ``held``."""
    return NodeRoom(name, {GPU: allocatable * 1000}, {GPU: held * 1000})


SHORTFALLS = {
    # 2, 1 and 1 GPU on nodes of 2 and 1 GPU, nothing held: first fit decreasing places 2 on
    # a, 1 on b, the last 1 nowhere: room 2. 4 GPUs asked, 3 in the cluster: only a node helps.
    "heterogeneous, more than the cluster has": (
        dict(request=1000, min_member=3, bound=0, nodes=[gpus("a", 2), gpus("b", 1)],
             requests=(1000, 2000, 1000)),
        "needs 2 + 1 + 1 nvidia.com/gpu (3 members to place); the cluster has 3 allocatable on "
        "2 nodes, room for 2 members now: freeing capacity cannot make room, it takes a new "
        "node (at least 1 nvidia.com/gpu more), or min-available would have to drop to 2"),
    # the same on nodes of 2 and 2 GPU, another pod holding 1 on a: 2 -> b, 1 -> a, 1 nowhere;
    # 4 asked of 4: freeing the other pod's GPU helps.
    "heterogeneous, held by another pod": (
        dict(request=2000, min_member=3, bound=0, nodes=[gpus("a", 2, held=1), gpus("b", 2)],
             requests=(2000, 1000, 1000)),
        "needs 2 + 1 + 1 nvidia.com/gpu (3 members to place); the cluster has 4 allocatable on "
        "2 nodes, room for 2 members now: at least 1 nvidia.com/gpu more must free up (1 "
        "member's worth, each on one node), held by other pods, or min-available would have "
        "to drop to 2"),
    # homogeneous: as before, N x request
    "homogeneous, held by other pods": (
        dict(request=1000, min_member=3, bound=0, nodes=[gpus("a", 2, held=1),
                                                         gpus("b", 2, held=1)]),
        "needs 3 x 1 nvidia.com/gpu (3 members to place); the cluster has 4 allocatable on 2 "
        "nodes, room for 2 members now: 1 nvidia.com/gpu more must free up (1 member's worth, "
        "each on one node), held by other pods, or min-available would have to drop to 2"),
    # room for none, none bound: no min-available of 0 is offered
    "room for none: no min-available 0": (
        dict(request=1000, min_member=2, bound=0, nodes=[gpus("a", 1, held=1),
                                                         gpus("b", 1, held=1)]),
        "needs 2 x 1 nvidia.com/gpu (2 members to place); the cluster has 2 allocatable on 2 "
        "nodes, room for 0 members now: 2 nvidia.com/gpu more must free up (2 members' worth, "
        "each on one node), held by other pods"),
    # 2 of minMember 3 bound (they hold 1 GPU each of 3), room for none: min-available may
    # drop to the 2 bound, never below; 1 asked, 3 - 2 = 1 could ever be free: freeing helps
    "two bound, room for none": (
        dict(request=1000, min_member=3, bound=2, nodes=[gpus("a", 2, held=2),
                                                         gpus("b", 1, held=1)]),
        "needs 1 x 1 nvidia.com/gpu (1 member to place); the cluster has 3 allocatable on 2 "
        "nodes, room for 0 members now: 1 nvidia.com/gpu more must free up (1 member's worth, "
        "each on one node), held by other pods, or min-available would have to drop to 2"),
    # 2 of minMember 4 bound on a cluster of 3: 2 more asked, 3 - 2 = 1 could ever be free
    "two bound, the rest beyond the cluster": (
        dict(request=1000, min_member=4, bound=2, nodes=[gpus("a", 2, held=2), gpus("b", 1)]),
        "needs 2 x 1 nvidia.com/gpu (2 members to place); the cluster has 3 allocatable on 2 "
        "nodes, room for 1 member now: freeing capacity cannot make room, it takes a new node "
        "(at least 1 nvidia.com/gpu more), or min-available would have to drop to 3"),
}


@pytest.mark.parametrize("name", SHORTFALLS)
def test_shortfall_text(name: str) -> None:
    args, text = SHORTFALLS[name]
    assert shortfall_text(shortfall(GPU, **args)) == text


PREEMPTING = {
    # 4 nodes of 1 GPU, 3 held by other pods: room 1 of the 2 members to place; evicting every
    # pod of priority below 1000 would leave room for 1 (the others hold theirs at >= 1000)
    "preemption cannot make room": (
        dict(priority=1000, room_preempting=1),
        "needs 2 x 1 nvidia.com/gpu (2 members to place); the cluster has 4 allocatable on 4 "
        "nodes, room for 1 member now: 1 nvidia.com/gpu more must free up (1 member's worth, "
        "each on one node), held by other pods; preemption cannot make room: evicting every "
        "pod of priority below 1000 would leave room for 1 member, or min-available would "
        "have to drop to 1"),
    # the same, the pods holding 2 of them of lower priority: room for 3 once evicted
    "preemption can make room": (
        dict(priority=1000, room_preempting=3),
        "needs 2 x 1 nvidia.com/gpu (2 members to place); the cluster has 4 allocatable on 4 "
        "nodes, room for 1 member now: 1 nvidia.com/gpu more must free up (1 member's worth, "
        "each on one node), held by other pods; pods of priority below 1000 hold enough of "
        "it: preemption can make room, or min-available would have to drop to 1"),
    "members that never preempt": (
        dict(priority=1000, room_preempting=None),
        "needs 2 x 1 nvidia.com/gpu (2 members to place); the cluster has 4 allocatable on 4 "
        "nodes, room for 1 member now: 1 nvidia.com/gpu more must free up (1 member's worth, "
        "each on one node), held by other pods; its members do not preempt (preemptionPolicy "
        "Never), or min-available would have to drop to 1"),
}


@pytest.mark.parametrize("name", PREEMPTING)
def test_shortfall_text_tells_what_preemption_can_do(name: str) -> None:
    """Rule PR4 in the advice: the same shortfall (2 members of 1 GPU to place, room for 1)
    with what preempting every lower-priority pod would leave room for."""
    given, text = PREEMPTING[name]
    short = shortfall(GPU, 1000, 2, 0, [gpus("a", 1, held=1), gpus("b", 1, held=1),
                                        gpus("c", 1, held=1), gpus("d", 1)])
    assert short.room_counting_preemption is None  # no priority: as before
    short = short._replace(**given)
    assert short.room_counting_preemption == (given["room_preempting"]
                                              if given["room_preempting"] is not None else 1)
    assert shortfall_text(short) == text


@pytest.mark.parametrize("requests,free,placed", [
    ((2000, 1000, 1000), (2000, 1000), 2),      # 2 -> first node, 1 -> second, 1 nowhere
    ((1000, 2000, 1000), (1000, 2000), 2),      # largest first: 2 -> second, 1 -> first
    ((1000, 1000, 1000), (2000, 1000), 3),      # equal requests: exact
    ((3000,), (2000, 2000), 0),                 # a request never split across nodes
])
def test_first_fit_decreasing(requests: tuple[int, ...], free: tuple[int, ...],
                              placed: int) -> None:
    assert first_fit(requests, free) == placed


def facts(unfit: dict[str, str], fit: int = 0, min_member: int = 2,
          shortfall_: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"unfit": unfit, "fit": fit, "min_member": min_member, "since": 0}
    if shortfall_ is not None:
        out["shortfall"] = shortfall_
    return out


UNBLOCK = {
    "node selector mismatch": (
        facts({"p-0": "0/2 nodes are available: 2 node(s) didn't match Pod's node "
                      "affinity/selector."}),
        "label a node to match the pod's node selector/affinity (or change them), or add a "
        "node that matches; freeing capacity does not help (node(s) didn't match Pod's node "
        "affinity/selector on 2 of 2 nodes); the gang is retried as a whole"),
    "untolerated taint": (
        facts({"p-0": "0/2 nodes are available: 2 node(s) had untolerated taint "
                      "{dedicated: ml}."}, fit=1),
        "add a toleration for the nodes' taint (or remove the taint), or add a node that "
        "matches; freeing capacity does not help (node(s) had untolerated taint {dedicated: "
        "ml} on 2 of 2 nodes); the gang is retried as a whole"),
    # 3 GPUs asked, 2 in the cluster: a new node, not "free"
    "more than the cluster has": (
        facts({"p-2": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}, fit=2,
              min_member=3, shortfall_={"resource": GPU, "request": 1000, "allocatable": 2000,
                                        "nodes": 2, "room": 2, "largest": 1000, "bound": 0}),
        "add a node with at least 1 nvidia.com/gpu more: the members to place ask more than "
        "the cluster's 2 could ever free, or lower minMember to 2; the gang is retried as a "
        "whole"),
    # the GPUs are held by other pods, room for none: free them; no minMember of 0
    "held by other pods, room for none": (
        facts({"p-0": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."},
              shortfall_={"resource": GPU, "request": 1000, "allocatable": 2000, "nodes": 2,
                          "room": 0, "largest": 1000, "bound": 0}),
        "free 2 nvidia.com/gpu (2 members' worth, each on one node), now held by other pods; "
        "the gang is retried as a whole"),
    # heterogeneous (2, 1, 1 on nodes of 1): 2 is more than any node has
    "heterogeneous, a member too big for every node": (
        facts({"p-0": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}, min_member=3,
              shortfall_={"resource": GPU, "request": 1000, "allocatable": 2000, "nodes": 2,
                          "room": 2, "largest": 1000, "bound": 0,
                          "requests": [2000, 1000, 1000]}),
        "one member asks 2 nvidia.com/gpu, more than any node has allocatable (at most 1): "
        "lower its request or add a node with more; the gang is retried as a whole"),
}


@pytest.mark.parametrize("name", UNBLOCK)
def test_unblock_is_of_the_right_kind(name: str) -> None:
    given, text = UNBLOCK[name]
    assert unblock_text(given) == text


# -- no warning from facts that are not news ----------------------------------------------------

SHORT = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def failing(t: float, room: int, count: int) -> Any:
    """g-1's own fit error at t, the cluster's room for 1 GPU members then ``room``."""
    return attempt("g-1", t, "ev-g1", "Filter", "Unschedulable", count=count,
                   reason="Insufficient nvidia.com/gpu", culprit="g-1", fit_error=SHORT,
                   waited=0)._replace(capacity=Capacity(GPU, 1000, 2000, room * 1000, 2, room,
                                                        1000))


def unschedulable(records: list[Any], end: float = 120) -> list[tuple[float, int]]:
    """(seconds after T0, room) of every GangUnschedulable."""
    out = fold_records(records, end)
    return [((parse_time(o["observed_at"]) - at(0)) / 1e6, o["facts"]["shortfall"]["room"])
            for o in out if o.get("reason") == "GangUnschedulable"]


MEMBERS = [pod("g-0", 0), pod("g-1", 0)]


@pytest.mark.parametrize("name,records,told", [
    # room 0 from t=1: told at t=11 (settled); at t=20 the room is 2 (the victims left): the
    # gang fits now, no second warning
    ("recovery is no news", MEMBERS + [failing(1, 0, 1), failing(12, 0, 2),
                                      failing(20, 2, 3)], [(11, 0)]),
    # the same with room 1 at t=20 (still short): its news is sent at t=21 (10 s refresh)
    ("a change that is still short is news", MEMBERS + [failing(1, 0, 1), failing(12, 0, 2),
                                                        failing(20, 1, 3)],
     [(11, 0), (21, 1)]),
    # the pods are deleted at t=5; the scheduler's late Events come at t=6-8: nothing
    ("late Events of a gang whose pods are gone", MEMBERS + [
        failing(1, 0, 1),
        pod("g-0", 5, rv="2", type_="DELETED"), pod("g-1", 5, rv="2", type_="DELETED"),
        failing(6, 0, 2), failing(7, 0, 3), failing(8, 0, 4)], []),
])
def test_no_warning_from_facts_that_are_not_news(name: str, records: list[Any],
                                                 told: list[tuple[float, int]]) -> None:
    assert unschedulable(records) == told


def test_a_pod_scheduled_on_its_own_that_no_node_may_take_is_told_of_labels() -> None:
    """A replacement of a once-satisfied gang (scheduled on its own, rule P4) that fails with
    ``node(s) didn't match Pod's node affinity/selector``: explain advises a label or a
    matching node, never free capacity."""
    from streams.core.explain import why_pod

    records: list[Any] = [pod("g-0", 0), pod("g-1", 0)]
    records += [pod(n, 1, rv="2", type_="MODIFIED", node="n1", phase="Running")
                for n in ("g-0", "g-1")]
    records += [pod("g-1", 10, rv="3", type_="DELETED", node="n1", phase="Running"),
                pod("g-2", 11),
                attempt("g-2", 12, "ev-g2", "Filter", "Unschedulable",
                        reason="node(s) didn't match Pod's node affinity/selector",
                        culprit="g-2", fit_error="0/2 nodes are available: 2 node(s) didn't "
                        "match Pod's node affinity/selector.")]
    store: dict = {}
    fold_records(records, store=store)
    why = why_pod(store["ns/g"], "ns/g-2")
    assert why["unblock"] == [
        "label a node to match the pod's node selector/affinity (or change them), or add a "
        "node that matches; freeing capacity does not help (node(s) didn't match Pod's node "
        "affinity/selector); no other member has to fit with it"]


def test_the_episode_carries_what_preemption_can_do_into_gang_unschedulable() -> None:
    """The wasted preemption of the real scheduler, by its facts (rule PR4): 3 members of 1 GPU
    (priority 1000) on 3 nodes of 1 GPU, each held by another pod, two of them of lower
    priority: room 0 now, room_preempting 2. The GangUnschedulable (told 10 s after the first
    failure, settled) carries priority and room_preempting in its shortfall and says that
    preemption cannot make room; the gang's state keeps them through its wire form."""
    from streams.core.state import from_wire, to_wire

    short = Capacity(GPU, 1000, 3000, 0, 3, 0, 1000, (), 1000, 2)
    records: list[Any] = [pod(f"g-{i}", 0, min_available="3") for i in range(3)]
    records += [attempt("g-1", t, "ev-g1", "Filter", "Unschedulable", count=n,
                        reason="Insufficient nvidia.com/gpu", culprit="g-1",
                        fit_error="0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
                        waited=0)._replace(capacity=short)
                for n, t in enumerate((1, 12), start=1)]
    store: dict[str, Any] = {}
    (told,) = [o for o in fold_records(records, 60, store=store)
               if o.get("reason") == "GangUnschedulable"]
    assert told["facts"]["shortfall"] == {
        "resource": GPU, "request": 1000, "allocatable": 3000, "nodes": 3, "room": 0,
        "largest": 1000, "priority": 1000, "room_preempting": 2, "bound": 0}
    assert told["message"].endswith(
        "it needs 3 x 1 nvidia.com/gpu (3 members to place); the cluster has 3 allocatable on "
        "3 nodes, room for 0 members now: 3 nvidia.com/gpu more must free up (3 members' "
        "worth, each on one node), held by other pods; preemption cannot make room: evicting "
        "every pod of priority below 1000 would leave room for 2 members")  # room 0: no
    # smaller min-available is offered (never 0)
    state = store["ns/g"]
    assert state.episode.capacity == short
    assert from_wire(to_wire(state)).episode.capacity == short
