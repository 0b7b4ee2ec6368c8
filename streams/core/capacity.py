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
- a node with ``spec.unschedulable`` fits nothing but a pod that tolerates the taint
  ``node.kubernetes.io/unschedulable:NoSchedule`` (KS
  ``framework/plugins/nodeunschedulable/node_unschedulable.go``);
- a node with a ``NoSchedule`` or ``NoExecute`` taint the pod does not tolerate fits nothing
  (KS ``framework/plugins/tainttoleration/taint_toleration.go`` ``Filter``,
  ``framework/plugins/helper/taint.go`` ``DoNotScheduleTaintsFilterFunc``), a toleration
  matching as k8s.io/api v0.35.2 ``core/v1/toleration.go:52-77`` ``ToleratesTaint`` (the
  ``Lt``/``Gt`` operators of the alpha gate ``TaintTolerationComparisonOperators``, off by
  default, tolerate nothing). This is what keeps a node that just joined out of the room: the
  API server's ``TaintNodesByCondition`` admission gives every new Node
  ``node.kubernetes.io/not-ready:NoSchedule`` until kube-controller-manager sees it Ready, and
  a gang told it fits there would fail its next round (docs/koordinator-rules.md row CAP1).

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


class Taint(NamedTuple):
    """A Node's taint of effect ``NoSchedule`` or ``NoExecute`` (the only ones that keep a pod
    off a node); ``value`` is ``""`` when the taint has none."""

    key: str
    value: str
    effect: str

    def text(self) -> str:
        """As kubectl writes it: ``key=value:effect`` (``key:effect`` without a value)."""
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


class Toleration(NamedTuple):
    """A pod's toleration (``spec.tolerations[]``); empty strings where a field is unset (an
    empty ``operator`` means ``Equal``, an empty ``effect`` every effect, an empty ``key``
    with ``Exists`` every taint)."""

    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """True when this toleration matches ``taint`` (k8s.io/api v0.35.2
        ``core/v1/toleration.go:52-77``; ``Lt``/``Gt`` match nothing: their gate is off by
        default in v1.35)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


#: the taint a cordoned node stands for: NodeUnschedulable lets a pod that tolerates it on
#: (KS ``framework/plugins/nodeunschedulable/node_unschedulable.go``)
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


def tolerations_of(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    """The tolerations of a pod's ``spec`` (entries that are not objects are skipped)."""
    out = []
    for t in spec.get("tolerations") or ():
        if isinstance(t, Mapping):
            out.append(Toleration(str(t.get("key") or ""), str(t.get("operator") or ""),
                                  str(t.get("value") or ""), str(t.get("effect") or "")))
    return tuple(out)


class NodeRoom(NamedTuple):
    """One Node as the shortfall sees it: ``allocatable`` and ``requested`` (by the pods bound
    to it) per resource in milli-units, ``unschedulable`` (``spec.unschedulable``), ``taints``
    (its ``NoSchedule``/``NoExecute`` taints)."""

    name: str
    allocatable: Mapping[str, int]
    requested: Mapping[str, int]
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()

    def free(self, resource: str) -> int:
        """Allocatable minus requested of ``resource`` (milli-units, never below 0)."""
        return max(0, self.allocatable.get(resource, 0) - self.requested.get(resource, 0))

    def admits(self, tolerations: Sequence[Toleration]) -> bool:
        """True when a pod with ``tolerations`` may be scheduled here: not cordoned (or it
        tolerates ``UNSCHEDULABLE_TAINT``) and every taint tolerated (KS TaintToleration
        ``Filter``: the first untolerated ``NoSchedule``/``NoExecute`` taint rejects)."""
        if self.unschedulable and not any(t.tolerates(UNSCHEDULABLE_TAINT)
                                          for t in tolerations):
            return False
        return all(any(t.tolerates(taint) for t in tolerations) for taint in self.taints)


def schedulable(nodes: Sequence[NodeRoom],
                tolerations: Sequence[Toleration] = ()) -> list[NodeRoom]:
    """The ``nodes`` a pod with ``tolerations`` may be scheduled on (``NodeRoom.admits``), in
    the order given."""
    return [n for n in nodes if n.admits(tolerations)]


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
    taints = tuple(Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t["effect"]))
                   for t in spec.get("taints") or []
                   if isinstance(t, Mapping) and t.get("effect") in ("NoSchedule", "NoExecute"))
    return NodeRoom(str(meta.get("name", "")), allocatable, requested,
                    bool(spec.get("unschedulable")), taints)


class Shortfall(NamedTuple):
    """What a gang short of ``resource`` needs and what the cluster has (milli-units).

    ``request``: one member's request (the culprit's); ``needed``: members still to place
    (minMember minus ``bound``, the members already bound); ``allocatable``/``free``: sums
    over the schedulable nodes (those the member may be scheduled on: ``schedulable``);
    ``nodes``: how many schedulable nodes have some of
    ``resource`` allocatable (for cpu and memory every schedulable node; a CPU-only node is not
    counted for a GPU: it could never hold a member of the gang short of it); ``room``: how many
    members fit now, node by node (Σ ⌊free / request⌋, or, with ``requests``, how many of
    them ``first_fit`` places); ``largest``: the most any schedulable node has allocatable;
    ``never_fits``: a member's request exceeds every node's allocatable (no amount of
    freeing helps); ``requests``: the requests of the gang's members still to place, largest
    first, when they differ (a heterogeneous gang), else empty.
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
    requests: tuple[int, ...] = ()
    priority: int | None = None
    room_preempting: int | None = None

    @property
    def to_place(self) -> tuple[int, ...]:
        """The requests of the members to place, largest first: ``requests`` for a
        heterogeneous gang, else ``needed`` times ``request``."""
        return self.requests if self.requests else (self.request,) * self.needed

    @property
    def room_counting_preemption(self) -> int | None:
        """How many members to place fit once preemption has done all it can (rule PR4):
        ``room_preempting``, or ``room`` for members that never preempt (a ``priority``
        without ``room_preempting``: ``preemptionPolicy: Never``); ``None`` when the
        culprit's priority is not known."""
        if self.priority is None:
            return None
        return self.room if self.room_preempting is None else self.room_preempting

    @property
    def missing_members(self) -> int:
        """Members that do not fit now (0 when the gang fits on this resource)."""
        return max(0, len(self.to_place) - self.room)

    @property
    def min_member(self) -> int:
        """The gang's minMember (``needed`` plus ``bound``)."""
        return self.needed + self.bound

    @property
    def can_free(self) -> int:
        """The most the cluster could ever have free for the members to place: its allocatable
        less what the gang's bound members hold (``bound`` times ``request``; for a
        heterogeneous gang, whose bound members' requests are not known, nothing)."""
        held = 0 if self.requests else self.bound * self.request
        return max(0, self.allocatable - held)


def first_fit(requests: Sequence[int], free: Sequence[int]) -> int:
    """How many of ``requests`` fit into the nodes' ``free`` amounts, each request whole on
    one node: first fit decreasing (requests largest first, each into the first node, in the
    order given, with room left). Deterministic; a greedy count (the exact packing problem is
    NP-hard), exact for equal requests. Milli-units."""
    left = list(free)
    placed = 0
    for request in sorted(requests, reverse=True):
        for i, room in enumerate(left):
            if request <= room:
                left[i] = room - request
                placed += 1
                break
    return placed


def room_of(request: int, requests: Sequence[int], free: Sequence[int]) -> int:
    """How many members fit into the nodes' ``free`` amounts (milli-units, one per node):
    Σ ⌊free / request⌋ node by node for members that ask ``request`` each, or, given
    ``requests`` (a heterogeneous gang's, largest first), how many of them ``first_fit``
    places."""
    if requests:
        return first_fit(requests, free)
    return sum(f // request for f in free) if request > 0 else 0


def room_after_preempting(request: int, requests: Sequence[int], free: Sequence[int],
                          lower: Sequence[int]) -> int:
    """``room_of`` once every pod of lower priority than the member is evicted: each node's
    free amount plus ``lower``, what its pods of lower priority request (milli-units, same
    order as ``free``). kube-scheduler's DefaultPreemption may evict only pods of lower
    priority than the preemptor (KS v1.35.2 ``framework/plugins/defaultpreemption/
    default_preemption.go`` ``SelectVictimsOnNode``, docs/koordinator-rules.md row PR3), so
    this is the most preemption could ever make room for: fewer members than the gang must
    place means preemption cannot make it fit."""
    return room_of(request, requests, [f + extra for f, extra in zip(free, lower)])


def shortfall(resource: str, request: int, min_member: int, bound: int,
              nodes: Sequence[NodeRoom], requests: Sequence[int] = (),
              tolerations: Sequence[Toleration] = ()) -> Shortfall:
    """The :class:`Shortfall` of a gang whose members each request ``request`` milli-units of
    ``resource`` (or, given ``requests``, the members still to place ask those), with
    ``min_member`` and ``bound`` members, over the ``nodes`` a member with ``tolerations``
    may be scheduled on (``schedulable``: a cordoned node and one with a taint it does not
    tolerate are left out, as NodeUnschedulable and TaintToleration filter them;
    ``Shortfall.nodes`` counts those left with some of ``resource`` allocatable)."""
    return shortfall_over(resource, request, min_member, bound, schedulable(nodes, tolerations),
                          requests)


def shortfall_over(resource: str, request: int, min_member: int, bound: int,
                   usable: Sequence[NodeRoom], requests: Sequence[int] = ()) -> Shortfall:
    """``shortfall`` over nodes already known to admit the member (``schedulable``'s answer),
    so that a caller that needs them for more (``room_after_preempting``) filters once."""
    having = sum(1 for n in usable if n.allocatable.get(resource, 0) > 0)
    largest = max((n.allocatable.get(resource, 0) for n in usable), default=0)
    asked = tuple(sorted(requests, reverse=True))
    room = room_of(request, asked, [n.free(resource) for n in usable])
    too_big = (asked[0] if asked else request) > largest
    return Shortfall(resource, request, max(0, min_member - bound), bound,
                     sum(n.allocatable.get(resource, 0) for n in usable),
                     sum(n.free(resource) for n in usable), having, room,
                     largest, too_big, asked)


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


def _members(n: int) -> str:
    return f"{n} {'member' if n == 1 else 'members'}"


def needs_text(s: Shortfall) -> str:
    """What the gang needs, for people: ``3 x 1 nvidia.com/gpu (3 members to place)``, or for
    a heterogeneous gang ``2 + 1 + 1 nvidia.com/gpu (3 members to place)``."""
    def q(milli: int) -> str:
        return format_quantity(s.resource, milli)

    place = s.to_place
    amounts = " + ".join(q(r) for r in place) if s.requests \
        else f"{len(place)} x {q(s.request)}"
    return f"{amounts} {s.resource} ({_members(len(place))} to place)"


def lower_min_member(s: Shortfall) -> int | None:
    """The minMember that would fit now (``bound`` plus ``room``), offered only when it is at
    least 1 and below minMember; never 0 and never below the members already bound."""
    value = s.bound + min(s.room, len(s.to_place))
    return value if 1 <= value < s.min_member and value >= s.bound else None


def more_text(s: Shortfall) -> str:
    """How much more of the resource must be free for the members that do not fit now: their
    requests (the smallest ``missing_members`` of a heterogeneous gang's, "at least"), each on
    one node, e.g. ``1 nvidia.com/gpu more must free up (1 member's worth, each on one
    node)``."""
    missing = s.missing_members
    worth = "1 member's" if missing == 1 else f"{missing} members'"
    smallest = sorted(s.to_place)[:missing]
    least = "at least " if s.requests else ""
    return (f"{least}{format_quantity(s.resource, sum(smallest))} {s.resource} more must "
            f"free up ({worth} worth, each on one node)")


def beyond_cluster(s: Shortfall) -> int:
    """How much the members to place ask beyond what the cluster could ever have free for
    them (``Shortfall.can_free``), milli-units; 0 when freeing could make room."""
    return max(0, sum(s.to_place) - s.can_free)


def cannot_fit(s: Shortfall) -> bool:
    """True only when the members to place cannot all fit in the cluster as it is, even once
    preemption has evicted every pod it may (rule PR4): a member asks more than any node has
    allocatable (``never_fits``); or they ask more than the cluster could ever free for them
    (``beyond_cluster``); or, members of one request, fewer of them fit once every pod of lower
    priority is gone than are to place (``room_counting_preemption``: Σ ⌊(free + lower) /
    request⌋ node by node, exact). False when they may fit, and when it is not known: the
    culprit's priority unknown, or a heterogeneous gang (its room is a first fit, which can
    miss a packing that exists, so it never proves that none does). The test of a gang that
    may be held out of the scheduling queue (issue 24: a gang is held only where it cannot
    fit); ``tests/unit/test_cannot_fit.py`` checks it against every packing of random
    clusters."""
    if s.never_fits or beyond_cluster(s) > 0:
        return True
    room = s.room_counting_preemption
    return not s.requests and room is not None and room < len(s.to_place)


def shortfall_text(s: Shortfall, least: str = "min-available") -> str:
    """One sentence for people, e.g. ``needs 3 x 1 nvidia.com/gpu (3 members to place); the
    cluster has 4 allocatable on 4 nodes, room for 2 members now: 1 nvidia.com/gpu more must
    free up (1 member's worth, each on one node), or min-available would have to drop to 2``.
    What is free is told by the room (members that fit now, node by node), not summed: a sum
    of scattered free amounts misleads. The advice is of the kind that can help: when the
    members ask more than the cluster could ever free for them (``beyond_cluster``), only a
    new node does; a smaller min-available is offered only as ``lower_min_member`` allows
    (never 0, never below the members bound). ``least`` names the gang's minimum as its
    scheduler does (``minCount`` for a native gang)."""
    def q(milli: int) -> str:
        return format_quantity(s.resource, milli)

    head = (f"needs {needs_text(s)}; the cluster has {q(s.allocatable)} allocatable on "
            f"{s.nodes} {'node' if s.nodes == 1 else 'nodes'}")
    if s.never_fits:
        asked = s.to_place[0] if s.to_place else s.request
        return (f"{head}: one member's {q(asked)} is more than any node has allocatable "
                f"(at most {q(s.largest)}), so it can never fit")
    if s.missing_members == 0:
        return f"{head}, room for {s.room} now: enough"
    lower = lower_min_member(s)
    alternative = "" if lower is None else f", or {least} would have to drop to {lower}"
    room = f"room for {_members(s.room)} now"
    beyond = beyond_cluster(s)
    if beyond:
        return (f"{head}, {room}: freeing capacity cannot make room, it takes a new node "
                f"(at least {q(beyond)} {s.resource} more){alternative}")
    return f"{head}, {room}: {more_text(s)}, held by other pods{preemption_text(s)}{alternative}"


def preemption_text(s: Shortfall) -> str:
    """What preemption can do for the members to place (rule PR4), a clause for
    ``shortfall_text``: e.g. ``; preemption cannot make room: evicting every pod of priority
    below 1000 would leave room for 2 members``, ``; pods of priority below 1000 hold enough
    of it: preemption can make room``, ``; its members do not preempt (preemptionPolicy
    Never)``; empty when the culprit's priority is not known."""
    if s.priority is None:
        return ""
    if s.room_preempting is None:
        return "; its members do not preempt (preemptionPolicy Never)"
    if s.room_preempting >= len(s.to_place):
        return f"; pods of priority below {s.priority} hold enough of it: preemption can make room"
    return (f"; preemption cannot make room: evicting every pod of priority below {s.priority} "
            f"would leave room for {_members(s.room_preempting)}")


def waiting_for_text(s: Shortfall) -> str:
    """What a gang that cannot fit (``cannot_fit``) waits for, for people, as the end of
    "held until ...": ``a node with at least 1 more nvidia.com/gpu joins`` when the members ask
    more than the cluster could ever free (``beyond_cluster``); ``a node with at least 8
    nvidia.com/gpu allocatable joins`` when one member asks more than any node has
    (``never_fits``); else, room held by pods preemption may not evict, ``1 nvidia.com/gpu
    more frees up on one node (held by pods of priority 1000 or more, which preemption does
    not evict) or a node with it joins``. Milli-units in, quantities as people write them
    out."""
    def q(milli: int) -> str:
        return format_quantity(s.resource, milli)

    if s.never_fits:
        asked = s.to_place[0] if s.to_place else s.request
        return f"a node with at least {q(asked)} {s.resource} allocatable joins"
    beyond = beyond_cluster(s)
    if beyond:
        return f"a node with at least {q(beyond)} more {s.resource} joins"
    room = s.room_counting_preemption
    missing = max(0, len(s.to_place) - (s.room if room is None else room))
    amount = sum(sorted(s.to_place)[:missing])
    holders = "held by other pods" if s.priority is None or s.room_preempting is None \
        else f"held by pods of priority {s.priority} or more, which preemption does not evict"
    return (f"{q(amount)} {s.resource} more frees up, each member's on one node ({holders}), "
            f"or a node with it joins")
