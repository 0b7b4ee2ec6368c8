"""The core's own record types: decoded input records, as immutable named tuples.

Where it sits: the functional core's input. ``streams.wire.decoding`` builds these from wire records
(``streams.wire.contracts``); the fold (``streams.core.fold``) consumes them. They carry only what the
fold reads, so a Pod of several KiB becomes a value of a few fields. Times are integer
microseconds since the Unix epoch (event time, the record's ``observed_at``).

Must not: import anything outside the standard library and ``streams.core``.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Union

from .spec import RawSettings


class PodObserved(NamedTuple):
    """A watch event (``ADDED``/``MODIFIED``/``DELETED``/``SYNC``) of a gang member Pod.

    ``gates`` are the names of the Pod's ``spec.schedulingGates`` in the order written (empty
    for a Pod without gates); kube-scheduler keeps a gated Pod out of scheduling
    (``SchedulingGates`` PreEnqueue plugin) until its controller removes every gate.
    ``status_reason`` is the Pod's ``status.reason`` (``Evicted`` for a pod the kubelet
    evicted, ``NodeLost``, ...; ``""`` when not set), which names how a member failed
    (``streams.core.lost``).
    """

    at: int
    type: str
    gang: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    node: str | None
    phase: str
    terminating: bool
    settings: RawSettings
    waits_for_podgroup: bool
    gates: tuple[str, ...] = ()
    status_reason: str = ""
    nominated_node: str | None = None


class PodGroupObserved(NamedTuple):
    """A watch event of a PodGroup: Koordinator's ``scheduling.sigs.k8s.io/v1alpha1`` (``gang``
    is its ``ns/name``) or a native ``scheduling.k8s.io`` one (``gang`` is
    ``ns/name@kube-scheduler``, ``streams.core.native``; ``settings`` from
    ``native.settings_of_native_podgroup``). ``conditions``: a native PodGroup's
    ``status.conditions`` as ``Type=Status`` or ``Type=Status/Reason`` strings, in the order
    written (``PodGroupInitiallyScheduled=True``, ``DisruptionTarget=True/PreemptionByScheduler``).
    """

    at: int
    type: str
    gang: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    settings: RawSettings
    conditions: tuple[str, ...] = ()


GANG_CHECK_REASONS = frozenset((
    "GangGroupRejected", "GangRejected", "GangBasicCheckUnsatisfied", "GangScheduleCycleInvalid",
    "GangGroupScheduling", "GangRepresentative", "PermitTimeout", "GangUnreserve"))
"""The cycle records' reasons that only Coscheduling's gang checks give (the watch's catalogue,
``producers.watch.scheduler_events``: PreEnqueue's representative and round refusals, the
basic check, a gang group rejected for another member, the Permit timeout and its
Unreserve). A group that skips the gang checks (rule P4) gets none of them (rule M6)."""


HELD_BY_GANGSTATE = "GangHeld"
"""The reason of the scheduler shim's records of a pod it refuses because gangstate holds its
gang (``HoldGang``; shim ``gangshim/holds.go`` ``reportHeld``): gangstate's own refusal, which
the shim undoes itself (it activates the pods when the hold ends), not Coscheduling's, which
nothing retries (rule ST1): such a record never makes a member refused (``fold.apply_cycle``)."""


class Capacity(NamedTuple):
    """What the cluster had for the culprit's short resource when the attempt failed (from
    the watcher's per-node cache; milli-units): ``resource`` (``nvidia.com/gpu``), ``request``
    (one member's), ``allocatable`` and ``free`` (sums over schedulable nodes), ``nodes``
    (schedulable ones), ``room`` (members of that request that fit now, node by node),
    ``largest`` (the most one node has allocatable); ``requests`` the requests of the gang's
    members still to place, largest first, when they differ (a heterogeneous gang: ``room``
    then counts how many of them fit, first fit, largest first; empty otherwise).
    ``priority`` is the culprit's (``spec.priority``) and ``room_preempting`` how many members
    would fit if its preemption evicted every pod of lower priority from every schedulable
    node (rule PR4); ``room_preempting`` is ``None`` with a ``priority`` for a member with
    ``preemptionPolicy: Never`` (it evicts nothing), both ``None`` when the producer does not
    know the culprit's priority (records written before them).
    ``streams.core.capacity`` does the arithmetic."""

    resource: str
    request: int
    allocatable: int
    free: int
    nodes: int
    room: int
    largest: int
    requests: tuple[int, ...] = ()
    priority: int | None = None
    room_preempting: int | None = None


class CycleObserved(NamedTuple):
    """One ``gangstate.cycle/v1`` record: one member's outcome in one scheduling cycle.

    ``pod`` and ``representative`` are ``ns/name``; ``cycle`` is the scheduler's attempt counter,
    or ``None`` when it is unknown (a record derived from a scheduler Event: Events carry no
    cycle number). Such a record is one attempt of one pod, identified by ``attempt`` (the
    source Event's uid and count, ``<uid>#<count>``; empty when ``cycle`` is known).
    ``culprit`` (``ns/name``) is the member whose failure to fit the attempt reports (the pod
    itself for its own fit error, another member for a refusal or release naming it),
    ``fit_error`` that member's fit error as the scheduler wrote it (``0/2 nodes are available:
    2 Insufficient nvidia.com/gpu.``) and ``already_wait_for_bound`` how many members of the
    gang group waited at Permit then (Koordinator's count); each ``None`` when the message does
    not say; ``capacity`` what the cluster had of the culprit's short resource, when the
    producer knows its nodes (contracts.md, ``gangstate.cycle/v1``). ``shim`` is the id of the
    scheduler shim that wrote the record (``""``: not the shim's: the watch producer's or the
    handed traces'); ``round`` the cycle number in which the round (Koordinator's gang scheduling
    context) the record belongs to was opened, ``None`` outside a round or when not known;
    ``rounds_skipped`` the rounds the shim reported only as a count before this one.
    ``from_condition`` is true for a record the watch producer derived from the pod's own
    ``PodScheduled`` condition (``source.kind`` ``condition``) rather than from a scheduler
    Event: it tells the same attempts as the Events (often before them, kube-scheduler's
    Events being throttled), so it marks the member as attempted and feeds the failure
    episode's facts, but counts no round and no attempt of the storm (``streams.core.fold.
    apply_cycle``).
    ``preemption`` is what the PostFilter text of a FailedScheduling message says of
    preemption (``producers.watch.scheduler_events.preemption_of``: ``victims-terminating``,
    ``no-victims``, ``not-helpful``, ``preempting``, ``other``), ``None`` when it says nothing.
    """

    at: int
    scheduler: str
    cycle: int | None
    pod: str
    pod_uid: str
    gang: str
    gang_group: str
    stage: str
    status: str
    reason: str
    message: str
    representative: str | None
    node: str | None
    attempt: str = ""
    culprit: str | None = None
    fit_error: str | None = None
    already_wait_for_bound: int | None = None
    capacity: Capacity | None = None
    shim: str = ""
    round: int | None = None
    rounds_skipped: int = 0
    from_condition: bool = False
    preemption: str | None = None


class PreemptionObserved(NamedTuple):
    """One ``gangstate.preemption/v1`` record: kube-scheduler preempted (evicted) a pod for a
    member of the gang (``type`` ``Preempted``, from the ``Preempted`` Event on the victim), or
    a pod preempted for the gang is gone (``type`` ``Deleted``: its deletion completed).

    ``victim`` is ``ns/name``, ``victim_uid`` its uid; ``node`` the node it was preempted on;
    ``preemptor`` the member (``ns/name``) it was preempted for, ``preemptor_uid`` its uid;
    ``grace_seconds`` the victim's deletion grace period (seconds) when the producer knows it;
    ``bound``: the victim was known bound to a node (a victim waiting at Permit is rejected,
    not deleted: kube-scheduler v1.35.2 ``framework/preemption/preemption.go:180-183``);
    ``event_at`` the ``Preempted`` Event's own time (its ``eventTime``, else ``lastTimestamp``;
    microseconds), ``None`` when not known: what a message tells as the preemption's time.
    """

    at: int
    type: str
    gang: str
    victim: str
    victim_uid: str
    node: str
    preemptor: str
    preemptor_uid: str
    grace_seconds: int | None = None
    bound: bool = True
    event_at: int | None = None


class AckObserved(NamedTuple):
    """One ``gangstate.ack/v1`` record: what the scheduler shim did with a command. ``reason``:
    why a ``Stale`` or ``PreconditionFailed`` command was not applied, as the shim wrote it
    (``None`` when absent)."""

    at: int
    command_id: str
    gang_group: str
    epoch: int
    outcome: str
    representative: str | None
    reason: str | None = None


class GangSummarized(NamedTuple):
    """A ``gangstate.gang-summary/v1`` record: what one gang (``gang``) tells another gang of
    its gang group (``to``) about itself, so that the other can tell whether the group can pass
    PreEnqueue. ``groups`` is the sender's gang group as it sees it; ``exists`` is false for a
    gang with no pods and no PodGroup; counts are pods. ``at`` is the event time the summary
    holds from. ``wanted_as_of`` (microseconds) asks the receiver for its own summary as of at
    least that event time: the sender is held and must know the group's state then.
    ``once_satisfied``: the sender's gang group was once satisfied (a member bound, rule M2:
    Koordinator keeps the flag on the group, shared by its gangs)."""

    at: int
    gang: str
    to: str
    groups: tuple[str, ...]
    exists: bool
    initialized: bool
    members: int
    min_member: int | None
    wanted_as_of: int | None = None
    once_satisfied: bool = False


class Tick(NamedTuple):
    """A ``gangstate.tick/v1`` record: only advances the event-time clock. ``cluster``: the
    cluster of the watch producer that sent it (``default`` for a record without one), so a
    worker knows which clusters' producers it hears (``PartitionFold.heard``; a replay's final
    ticks speak for the cluster replayed); ``None`` for a tick no record carried (the end of an
    offline fold)."""

    at: int
    cluster: str | None = None


class RosterObserved(NamedTuple):
    """One ``gangstate.roster/v1`` record: the gang pods a new watch producer process knows
    once its first lists are published, for one partition of ``gang-events`` (``partition``
    of ``partitions``) and ``cluster``: ``gangs`` maps each gang id whose key lands there to
    the uids of its pods. For each gang named, ``PartitionFold`` drops the members its entry
    does not name (a pod deleted while no watch ran); other gangs are left as they are."""

    at: int
    cluster: str
    partition: int
    partitions: int
    gangs: Mapping[str, frozenset[str]]


class CapacityObserved(NamedTuple):
    """One ``gangstate.capacity/v1`` record: the cluster's room for the short resource of a gang
    changed while no scheduling attempt reports it (the watch producer recomputes it on every
    Node and bound-pod change for the gangs whose failures carried a ``capacity``: a gang held
    out of the scheduling queue has no attempts, and its release waits on this). ``culprit``
    (``ns/name``) is the member whose request ``capacity`` counts, as in the cycle record it
    follows; ``capacity`` the same value as ``CycleObserved.capacity``. Event time ``at`` in
    microseconds."""

    at: int
    gang: str
    culprit: str
    capacity: Capacity


GangRecord = Union[PodObserved, PodGroupObserved, CycleObserved, AckObserved, GangSummarized,
                   PreemptionObserved, CapacityObserved]
"""A record that concerns one gang (or, for acks, one gang group)."""
Record = Union[GangRecord, Tick, RosterObserved]

FAILED_STATUSES = frozenset({"Unschedulable", "UnschedulableAndUnresolvable", "Error"})
"""Cycle statuses that count as a member failing its cycle on its own (contracts.md,
``gangstate.cycle/v1``): counted in the storm window, and a culprit of its own for a numbered
record that is not the shim's (``episode.own_failure``)."""
