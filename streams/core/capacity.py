"""The shortfall of a gang that cannot fit: how much of a resource the gang needs, how much the
cluster has and has free, and what would have to change (pure).

Where it sits: the functional core (standard library only). Fed with Nodes (allocatable,
unschedulable, taints) and the requests of the pods bound to them, it answers the question a
user asks of a gang that keeps failing with ``Insufficient <resource>``: "this gang needs 3
GPUs, the cluster has 2".

Rules followed, from kube-scheduler v1.35.2 (``k8s.io/kubernetes`` v1.35.2, KS =
``pkg/scheduler/``) and ``k8s.io/component-helpers`` v0.35.2 (CH):
- a pod's request of a resource is the sum over its containers, raised to what its init
  containers need while they run (restartable "sidecar" init containers add to both), plus the
  pod overhead (CH ``resource/helpers.go:149-190`` ``PodRequests``, ``:191-290``
  ``AggregateContainerRequests``);
- a node fits a pod's request of a resource when the request is no more than the node's
  allocatable minus what the pods on it request; otherwise NodeResourcesFit reports
  ``Insufficient <resource>``, unresolvable when the request exceeds the allocatable itself
  (KS ``framework/plugins/noderesources/fit.go:649-735`` ``fitsRequest``);
- a node with ``spec.unschedulable`` fits nothing (KS
  ``framework/plugins/nodeunschedulable/node_unschedulable.go``).
Taints are reported, not judged: whether a gang tolerates them is the TaintToleration plugin's
business and shows in the scheduler's own fit error.

Quantities are integers in milli-units (``"100m"`` cpu = 100, ``"1"`` = 1000, ``"64Mi"`` =
64 × 2^20 × 1000), as ``resource.Quantity.MilliValue`` (rounded up).

Must not: read the wall clock, import anything but the standard library.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any, Mapping, NamedTuple, Sequence

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}
_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)")


def parse_quantity(text: str) -> int:
    """A Kubernetes quantity (``"100m"``, ``"2"``, ``"64Mi"``, ``"1e3"``, ``"1.5Gi"``) in
    milli-units, rounded up (apimachinery ``pkg/api/resource/quantity.go`` ``ParseQuantity``,
    ``MilliValue``). Raises ``ValueError`` for anything else."""
    match = _QUANTITY.fullmatch(str(text).strip())
    if not match:
        raise ValueError(f"not a quantity: {text!r}")
    number, suffix = match.groups()
    try:
        value = Decimal(number)
        if suffix in _BINARY:
            value *= _BINARY[suffix]
        elif suffix in _DECIMAL:
            value *= _DECIMAL[suffix]
        elif suffix[:1] in ("e", "E") and re.fullmatch(r"[eE][+-]?[0-9]+", suffix):
            value *= Decimal(10) ** int(suffix[1:])
        else:
            raise ValueError(f"not a quantity: {text!r} (suffix {suffix!r})")
        return int((value * 1000).to_integral_value(rounding=ROUND_CEILING))
    except InvalidOperation:
        raise ValueError(f"not a quantity: {text!r}") from None


def _requests(container: Mapping[str, Any]) -> dict[str, int]:
    raw = ((container.get("resources") or {}).get("requests") or {})
    return {name: parse_quantity(value) for name, value in raw.items()}


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """What a pod (its ``spec``) requests, per resource, in milli-units: containers summed;
    each init container needs its own request plus the restartable init containers before it,
    and the pod needs the most of that and the containers' sum (restartable init containers
    count in the sum too); plus ``overhead`` (CH ``resource/helpers.go:149-290``). Raises
    ``ValueError`` for a malformed quantity."""
    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        _add(total, _requests(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.get("initContainers") or []:
        own = _requests(container)
        if container.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            running = dict(sidecars)
        else:
            running = dict(own)
            _add(running, sidecars)
        for name, value in running.items():
            init_peak[name] = max(init_peak.get(name, 0), value)
    for name, value in init_peak.items():
        total[name] = max(total.get(name, 0), value)
    overhead = spec.get("overhead") or {}
    _add(total, {name: parse_quantity(value) for name, value in overhead.items()})
    return total


class NodeRoom(NamedTuple):
    """One Node as the shortfall sees it: ``allocatable`` and ``requested`` (by the pods bound
    to it) per resource in milli-units, ``unschedulable`` (``spec.unschedulable``), ``taints``
    (``key=value:effect`` strings of NoSchedule/NoExecute taints)."""

    name: str
    allocatable: Mapping[str, int]
    requested: Mapping[str, int]
    unschedulable: bool = False
    taints: tuple[str, ...] = ()

    def free(self, resource: str) -> int:
        """Allocatable minus requested of ``resource`` (milli-units, never below 0)."""
        return max(0, self.allocatable.get(resource, 0) - self.requested.get(resource, 0))


def node_room(node: Mapping[str, Any], bound_pod_specs: Sequence[Mapping[str, Any]]) -> NodeRoom:
    """A :class:`NodeRoom` from a Node object and the specs of the pods bound to it (pods that
    have finished, ``Succeeded``/``Failed``, should not be passed: they hold nothing)."""
    meta, spec, status = (node.get("metadata") or {}), (node.get("spec") or {}), \
        (node.get("status") or {})
    allocatable = {name: parse_quantity(value)
                   for name, value in (status.get("allocatable") or {}).items()}
    requested: dict[str, int] = {}
    for pod_spec in bound_pod_specs:
        _add(requested, pod_requests(pod_spec))
    taints = tuple(f"{t.get('key', '')}{'=' + t['value'] if t.get('value') else ''}:"
                   f"{t.get('effect', '')}" for t in spec.get("taints") or []
                   if t.get("effect") in ("NoSchedule", "NoExecute"))
    return NodeRoom(str(meta.get("name", "")), allocatable, requested,
                    bool(spec.get("unschedulable")), taints)


class Shortfall(NamedTuple):
    """What a gang short of ``resource`` needs and what the cluster has (milli-units).

    ``request``: one member's request; ``needed``: members still to place (minMember minus
    ``bound``, the members already bound); ``allocatable``/``free``: sums over the schedulable
    nodes; ``nodes``: how many nodes are schedulable; ``room``: how many members fit now, node
    by node (Σ ⌊free / request⌋); ``largest``: the most any schedulable node has allocatable;
    ``never_fits``: the request exceeds every node's allocatable (no amount of freeing helps).
    """

    resource: str
    request: int
    needed: int
    bound: int
    allocatable: int
    free: int
    nodes: int
    room: int
    largest: int
    never_fits: bool

    @property
    def missing_members(self) -> int:
        """Members that do not fit now (0 when the gang fits on this resource)."""
        return max(0, self.needed - self.room)


def shortfall(resource: str, request: int, min_member: int, bound: int,
              nodes: Sequence[NodeRoom]) -> Shortfall:
    """The :class:`Shortfall` of a gang whose members each request ``request`` milli-units of
    ``resource``, with ``min_member`` and ``bound`` members, over ``nodes`` (unschedulable ones
    are left out, as NodeUnschedulable filters them)."""
    usable = [n for n in nodes if not n.unschedulable]
    per_node = [n.free(resource) // request if request > 0 else 0 for n in usable]
    largest = max((n.allocatable.get(resource, 0) for n in usable), default=0)
    return Shortfall(resource, request, max(0, min_member - bound), bound,
                     sum(n.allocatable.get(resource, 0) for n in usable),
                     sum(n.free(resource) for n in usable), len(usable), sum(per_node),
                     largest, request > largest)


def format_quantity(resource: str, milli: int) -> str:
    """A milli-unit amount as people write it: cpu ``"500m"``/``"2"``; memory and storage in
    binary units (``"64Mi"``, ``"1.5Gi"``); other resources as numbers (``"3"``)."""
    if resource == "cpu":
        return f"{milli // 1000}" if milli % 1000 == 0 else f"{milli}m"
    value = Decimal(milli) / 1000
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = _BINARY[suffix]
            if value >= unit:
                amount = (value / unit).quantize(Decimal("0.1")).normalize()
                return f"{amount:f}{suffix}"
    return f"{value.normalize():f}"


def shortfall_text(s: Shortfall) -> str:
    """One sentence for people, e.g. ``needs 3 x 1 nvidia.com/gpu (3 members to place); the
    cluster has 2 allocatable on 2 nodes, room for 2 members now: 1 nvidia.com/gpu more must
    free up (1 member's worth, each on one node), or min-available would have to drop to 2``.
    What is free is told by the room (members that fit now, node by node), not summed: a sum
    of scattered free amounts misleads."""
    def q(milli: int) -> str:
        return format_quantity(s.resource, milli)

    head = (f"needs {s.needed} x {q(s.request)} {s.resource} ({s.needed} "
            f"{'member' if s.needed == 1 else 'members'} to place); the cluster has "
            f"{q(s.allocatable)} allocatable on {s.nodes} {'node' if s.nodes == 1 else 'nodes'}")
    if s.never_fits:
        return (f"{head}: one member's {q(s.request)} is more than any node has allocatable "
                f"(at most {q(s.largest)}), so it can never fit")
    if s.missing_members == 0:
        return f"{head}, room for {s.room} now: enough"
    missing = s.missing_members
    worth = "1 member's" if missing == 1 else f"{missing} members'"
    return (f"{head}, room for {s.room} {'member' if s.room == 1 else 'members'} now: "
            f"{q(missing * s.request)} {s.resource} more must free up ({worth} worth, each on "
            f"one node), or min-available would have to drop to {s.bound + s.room}")
