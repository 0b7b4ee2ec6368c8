"""Wire contracts, version 1: pydantic models of every record gangstate reads or writes.

Where it sits: the edge of the pipeline. Producers, the Faust worker, the offline fold and the
audit tap validate raw Kafka values / trace lines against these models before anything else
touches them. These models are the public interface described in ``docs/contracts.md``
(schemas ``gangstate.kube/v1``, ``gangstate.cycle/v1``,
``gangstate.ack/v1``, ``gangstate.tick/v1``, ``gangstate.command/v1``,
``gangstate.diagnostic/v1``, ``gangstate.dead-letter/v1``); ``gangstate schema`` writes their JSON
Schemas to ``docs/schemas/``.

What it must not do: hold any gang logic. Field names are fixed by the contract; adding optional
fields is allowed, renaming is not. Kubernetes objects inside ``gangstate.kube/v1`` are kept as
raw JSON (``RawObject``): only the envelope and the ``metadata`` fields the fold reads are
validated, because a full Pod validation would cost more than the fold itself
(``docs/benchmarks.md``, "decode").
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Annotated, Any, Literal, Union

from typing_extensions import NotRequired, Required, TypedDict

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

# the ids of the records the core writes are the core's own (the core imports nothing from here)
from streams.core.cluster import (CLUSTER_MAX_LENGTH, CLUSTER_PATTERN, DEFAULT_CLUSTER,
                                  cluster_problem, key_of, split_key)
from streams.core.decide import COMMAND_SCHEMA, DIAGNOSTIC_SCHEMA, SUMMARY_SCHEMA
from streams.core.native import split_gang
from streams.core.rules import REASON_NAMES
from streams.core.timefmt import format_time, parse_time

KUBE_SCHEMA = "gangstate.kube/v1"
CYCLE_SCHEMA = "gangstate.cycle/v1"
ACK_SCHEMA = "gangstate.ack/v1"
TICK_SCHEMA = "gangstate.tick/v1"
PREEMPTION_SCHEMA = "gangstate.preemption/v1"
CAPACITY_SCHEMA = "gangstate.capacity/v1"
ROSTER_SCHEMA = "gangstate.roster/v1"
DEAD_LETTER_SCHEMA = "gangstate.dead-letter/v1"

INT64_MAX = 2**63 - 1
PARTITIONS_MAX = 100_000
"""The most partitions a ``gang-events`` topic may have in a roster record (Kafka itself
allows far fewer per broker in practice)."""
"""The largest number an input record may carry in ``cycle``, an ack's ``epoch``, a source
Event's ``count`` and a decimal ``resourceVersion`` (docs/contracts.md, "Limits"). Kubernetes
resourceVersions of an etcd-backed API server are etcd revisions, an ``int64``
(go.etcd.io/etcd/api/v3 v3.6.5 ``mvccpb/kv.pb.go:58``, ``ModRevision int64``), which
k8s.io/apiserver v0.35.2 writes and parses as a decimal (``pkg/storage/
api_object_versioner.go:40,55,94``); kube-scheduler v1.35.2's cycle counter is an ``int64``
(``pkg/scheduler/backend/queue/scheduling_queue.go:110``, ``SchedulingCycle() int64``)."""

PRIORITY_MIN, PRIORITY_MAX = -2**31, 2**31 - 1
"""A pod's ``spec.priority`` is an int32 (``k8s.io/api`` v0.35.2 ``core/v1/types.go``
``PodSpec.Priority *int32``)."""

RV_MAX_LENGTH = 64
"""The longest ``metadata.resourceVersion`` accepted, characters (a decimal int64 has at most
19 digits; a non-decimal resourceVersion, compared only for equality, is bounded too)."""


NAME_MAX_LENGTH = 253
"""The longest name of a Kubernetes object (Pod, PodGroup, Event) and of a gang, characters:
a DNS-1123 subdomain (k8s.io/apimachinery v0.35.2 ``pkg/util/validation/validation.go:191``
``DNS1123SubdomainMaxLength``; a Pod's name is one, kubernetes v1.35.2
``pkg/apis/core/validation/validation.go:285``, a custom resource's such as a PodGroup too,
k8s.io/apiextensions-apiserver v0.35.2 ``pkg/registry/customresource/validator.go:53``). A gang
named by the annotation ``gang.scheduling.koordinator.sh/name``, which Koordinator v1.8.0 does
not bound (``apis/extension/coscheduling.go:96-98``), names a PodGroup-like gang: the same
bound (docs/contracts.md, "Limits")."""

NAMESPACE_MAX_LENGTH = 63
"""The longest namespace name, characters: a DNS-1123 label (k8s.io/apimachinery v0.35.2
``pkg/api/validation/generic.go:69`` ``ValidateNamespaceName = NameIsDNSLabel``,
``pkg/util/validation/validation.go:161`` ``DNS1123LabelMaxLength``)."""

LABEL_VALUE_MAX_LENGTH = 63
"""The longest label value, characters (k8s.io/apimachinery v0.35.2
``pkg/api/validate/content/kube.go:78`` ``LabelValueMaxLength``): the gang names and
min-available of the ``pod-group.scheduling.sigs.k8s.io`` labels."""

GANG_ID_VIEW_PATTERN = rf"^[^/]{{1,{NAMESPACE_MAX_LENGTH}}}/[^/]{{1,{NAME_MAX_LENGTH}}}$"
"""A gang id ``namespace/name`` within the bounds: the decode views' check and the JSON
Schemas' pattern (the models check the pattern ``^[^/]+/[^/]+$``, then the lengths, to give
the reason)."""


SUBDOMAIN_RULE = "DNS-1123 subdomain, k8s.io/apimachinery DNS1123SubdomainMaxLength"
LABEL_RULE = "DNS-1123 label, k8s.io/apimachinery DNS1123LabelMaxLength"
LABEL_VALUE_RULE = "k8s.io/apimachinery LabelValueMaxLength"


def name_too_long(value: str, what: str, limit: int, rule: str) -> str | None:
    """The reason ``value`` is longer than a ``what`` may be (``limit`` characters, by the
    Kubernetes ``rule`` cited), naming its length and the limit; ``None`` when it is not."""
    if len(value) <= limit:
        return None
    return f"{len(value)} characters; a {what} has at most {limit} ({rule})"


def _bounded(value: str, what: str, limit: int, rule: str) -> str:
    reason = name_too_long(value, what, limit, rule)
    if reason is not None:
        raise ValueError(reason)
    return value


def check_gang_id(value: str) -> str:
    """``value`` when its namespace and name (``namespace/name``, the pattern checked before;
    a native gang's ``namespace/name@kube-scheduler``, whose name is the part before the
    suffix) are within ``NAMESPACE_MAX_LENGTH`` and ``NAME_MAX_LENGTH``; raises ``ValueError``
    with the reason otherwise."""
    namespace, name, _ = split_gang(value)
    _bounded(namespace, "namespace name", NAMESPACE_MAX_LENGTH, LABEL_RULE)
    _bounded(name, "gang or pod name", NAME_MAX_LENGTH, SUBDOMAIN_RULE)
    return value


def check_resource_version(value: str) -> str:
    """``value`` when it is a resourceVersion gangstate can order: a decimal one must be at
    most ``INT64_MAX``. Raises ``ValueError`` (the contract's reason) otherwise. The length
    bound (``RV_MAX_LENGTH``) is the field's own constraint."""
    if value.isdigit() and value.isascii() and int(value) > INT64_MAX:
        raise ValueError(f"a decimal resourceVersion is an etcd revision (int64): at most "
                         f"{INT64_MAX}")
    return value

Stage = Literal[
    "PreEnqueue", "PreFilter", "Filter", "PostFilter", "Permit", "Reserve", "Unreserve",
    "PreBind", "Bind",
]
"""Scheduling framework extension points a cycle record can report (kube-scheduler framework)."""

CycleStatus = Literal[
    "Gated", "Unschedulable", "UnschedulableAndUnresolvable", "Error", "Wait", "Rejected",
    "Timeout", "Success", "Bound",
]
"""Outcome of one member in one scheduling cycle (contracts.md, ``gangstate.cycle/v1``)."""

WatchType = Literal["ADDED", "MODIFIED", "DELETED", "SYNC"]
"""Kubernetes watch event types, plus ``SYNC`` for an object seen in a relist."""

Resource = Literal["pods", "podgroups", "events", "compositepodgroups", "workloads"]
"""What a ``gangstate.kube/v1`` record carries: a Pod, a PodGroup (Koordinator's
``scheduling.sigs.k8s.io`` or a native ``scheduling.k8s.io`` one: its ``apiVersion`` tells), a
core/v1 Event, a native CompositePodGroup (folded as the gang that counts its children, NG6 of
docs/native-gang-rules.md) or a native Workload (published for taps and audits; the fold skips
it)."""

DiagnosticReason = Literal[REASON_NAMES]  # type: ignore[valid-type]
"""Kubernetes Event reasons gangstate emits (contracts.md, ``gangstate.diagnostic/v1``): every
reason of the core's rule families, in the registry's order (``streams.core.rules.REASONS``)."""

CommandType = Literal["SwitchRepresentative", "ElectRepresentative", "HoldGang", "ReleaseGang",
                      "ActivateGang"]
CommandReason = Literal["RepresentativeGated", "RepresentativeDeleted", "GangCannotFit",
                        "CapacityChanged", "SpecChanged", "PriorityChanged", "HoldExpired",
                        "HoldsOff", "PreemptionDone", "MembersStranded"]
"""Why a command was issued (contracts.md, ``gangstate.command/v1``): ``RepresentativeGated``
(a ``SwitchRepresentative`` away from a representative with scheduling gates),
``RepresentativeDeleted`` (an ``ElectRepresentative`` after the representative was deleted),
``GangCannotFit`` (a ``HoldGang``), ``CapacityChanged``, ``SpecChanged``, ``PriorityChanged``,
``HoldExpired``, ``HoldsOff`` (a ``ReleaseGang``), ``PreemptionDone`` (an ``ActivateGang``: the
gang's victims are gone and its scheduler has not tried it since, rule PR7), ``MembersStranded``
(an ``ActivateGang`` with ``GangMembersStranded``, rule ST5)."""
AckOutcome = Literal["Applied", "Stale", "PreconditionFailed"]


class _Record(BaseModel):
    """Common base: unknown fields are allowed (the contract lets producers add optional ones)."""

    model_config = ConfigDict(extra="allow", frozen=True)


_SECONDS: dict[str, int] = {}
"""``YYYY-MM-DDTHH:MM:SS`` prefixes -> microseconds, for ``event_time`` (at most 4096: more than an
hour of event time; emptied when full)."""


def event_time(text: str) -> int:
    """``parse_time(text)`` exactly (same value, same ``ValueError``), faster for the contract's
    form ``YYYY-MM-DDTHH:MM:SS.ffffffZ``: the whole second is parsed once (cached) and the six
    fraction digits are added to it.

    A second is cached only after ``parse_time`` accepted it and it formats back to the same 19
    characters (so a form some Python reads differently, e.g. ``T24:00:00``, is never cached).
    """
    if len(text) == 27 and text[19] == "." and text[26] == "Z":
        fraction = text[20:26]
        if fraction.isdigit() and fraction.isascii():
            base = _SECONDS.get(text[:19])
            if base is not None:
                return base + int(fraction)
            micros = parse_time(text)
            base = micros - int(fraction)
            try:
                canonical = format_time(base)[:19] == text[:19]
            except (ArithmeticError, OSError, ValueError):  # a platform's time range
                canonical = False
            if canonical:
                if len(_SECONDS) >= 4096:
                    _SECONDS.clear()
                _SECONDS[text[:19]] = base
            return micros
    return parse_time(text)


def _cluster_field() -> Any:
    return Field(default=DEFAULT_CLUSTER, pattern=CLUSTER_PATTERN, max_length=CLUSTER_MAX_LENGTH,
                 description="the cluster the record is of (a DNS-1123 label, docs/fleet.md); "
                 "absent means \"default\", the single cluster of a gangstate without fleet")


def output_key(out: dict[str, Any], field: str) -> bytes:
    """The Kafka key of a fold output: its ``field`` (``gang``, ``gang_group`` or ``to``)
    within its ``cluster`` (``cluster.key_of``: ``eu-1:team-a/llm``; the bare id in the
    ``default`` cluster), UTF-8."""
    return key_of(out.get("cluster", DEFAULT_CLUSTER), out[field]).encode("utf-8")


def cluster_of_raw_key(key: bytes | None) -> str:
    """The cluster a raw Kafka key names (``eu-1:team-a/llm`` -> ``eu-1``; ``default`` for a
    bare id, no key or a key that is not UTF-8): what a dead letter says of its record's
    cluster when the record itself cannot be read. A key that only looks qualified (its prefix
    no cluster id, ``NOT A LABEL:x``) is ``default``'s: its text stays in the dead letter's
    ``key``."""
    if not key:
        return DEFAULT_CLUSTER
    try:
        cluster = split_key(key.decode("utf-8"))[0]
    except UnicodeDecodeError:
        return DEFAULT_CLUSTER
    return cluster if cluster_problem(cluster) is None else DEFAULT_CLUSTER


class _Timed(_Record):
    observed_at: str = Field(description="RFC 3339 UTC event time with microseconds")
    cluster: str = _cluster_field()

    @field_validator("observed_at")
    @classmethod
    def _rfc3339(cls, value: str) -> str:
        event_time(value)
        return value


class ObjectMeta(BaseModel):
    """The ``metadata`` fields of a Kubernetes object that gangstate reads; the rest is kept."""

    model_config = ConfigDict(extra="allow", frozen=True)
    name: str = Field(min_length=1, json_schema_extra={"maxLength": NAME_MAX_LENGTH})
    namespace: str = Field(default="", json_schema_extra={"maxLength": NAMESPACE_MAX_LENGTH})
    uid: str = Field(min_length=1)
    resourceVersion: str = Field(default="", max_length=RV_MAX_LENGTH)
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None

    @field_validator("resourceVersion")
    @classmethod
    def _rv_bounded(cls, value: str) -> str:
        return check_resource_version(value)

    @field_validator("name")
    @classmethod
    def _name_bounded(cls, value: str) -> str:
        return _bounded(value, "Kubernetes object name", NAME_MAX_LENGTH, SUBDOMAIN_RULE)

    @field_validator("namespace")
    @classmethod
    def _namespace_bounded(cls, value: str) -> str:
        return _bounded(value, "namespace name", NAMESPACE_MAX_LENGTH, LABEL_RULE)

    @field_validator("labels", "annotations", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value


class RawObject(BaseModel):
    """A Kubernetes object exactly as the API server returned it; only ``metadata`` is typed."""

    model_config = ConfigDict(extra="allow", frozen=True)
    apiVersion: str = ""
    kind: str = ""
    metadata: ObjectMeta
    spec: dict[str, Any] = Field(default_factory=dict)
    status: dict[str, Any] = Field(default_factory=dict)

    @field_validator("spec", "status", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value


class KubeRecord(_Timed):
    """``gangstate.kube/v1``: one watch event of a Pod, PodGroup or core/v1 Event."""

    schema_: Literal["gangstate.kube/v1"] = Field(alias="schema")
    resource: Resource
    type: WatchType
    object: RawObject


class PodRef(BaseModel):
    """A pod named by namespace, name and uid."""

    model_config = ConfigDict(extra="allow", frozen=True)
    namespace: str = Field(json_schema_extra={"maxLength": NAMESPACE_MAX_LENGTH})
    name: str = Field(min_length=1, json_schema_extra={"maxLength": NAME_MAX_LENGTH})
    uid: str = ""

    @field_validator("name")
    @classmethod
    def _name_bounded(cls, value: str) -> str:
        return _bounded(value, "Pod name", NAME_MAX_LENGTH, SUBDOMAIN_RULE)

    @field_validator("namespace")
    @classmethod
    def _namespace_bounded(cls, value: str) -> str:
        return _bounded(value, "namespace name", NAMESPACE_MAX_LENGTH, LABEL_RULE)


class EventSource(BaseModel):
    """The core/v1 scheduler Event a cycle record was derived from, or the pod's own
    ``PodScheduled`` condition (``kind`` ``condition``; set by the watch producer). ``uid``
    and ``count`` identify the attempt when the record has no cycle number: a relist of the
    same Event gives the same record, a repeat of an aggregated Event (a higher count) a new
    one; for a condition ``uid`` is ``cond:<pod uid>:<lastTransitionTime>:<sha256 of reason
    and message, 16 hex>`` and ``count`` 1."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: Literal["event", "condition"] = Field(
        default="event", description="event: a scheduler Event; condition: the pod's "
                                     "PodScheduled=False condition (reason Unschedulable or "
                                     "SchedulerError), which kube-scheduler writes with the "
                                     "latest attempt's message, only when it changes")
    event: str = Field(default="", description="the Event's namespace/name (empty for a "
                                               "condition)")
    uid: str = Field(default="", description="the Event's metadata.uid, or the condition's "
                                             "attempt id")
    last_transition_time: str = Field(
        default="", description="a condition's lastTransitionTime as written (RFC 3339)")
    count: int = Field(default=1, ge=1, le=INT64_MAX, description="how often the Event has happened: "
                                                    "series.count, else count, else 1")
    form: str = Field(default="", description="the row of the scheduler message catalogue "
                                              "(producers.watch.scheduler_events.CATALOGUE) the "
                                              "message matched; empty when none did")
    truncated: bool = Field(default=False, description="the message was cut at 1024 bytes "
                                                       "by kube-scheduler")


class CapacityFacts(BaseModel):
    """The cluster's room for the culprit's short resource when an attempt failed, from the
    producer's per-node cache (Nodes' allocatable, the requests of the pods bound to them).
    Amounts in milli-units (``"1"`` GPU = 1000, ``"100m"`` cpu = 100)."""

    model_config = ConfigDict(extra="ignore")
    resource: str = Field(min_length=1, description="e.g. nvidia.com/gpu, cpu, memory")
    request: int = Field(ge=0, description="one member's request (the culprit's)")
    allocatable: int = Field(ge=0, description="allocatable, summed over schedulable nodes "
                             "(those the culprit may be scheduled on: not cordoned, no "
                             "NoSchedule/NoExecute taint it does not tolerate)")
    free: int = Field(ge=0, description="allocatable minus what bound pods request, summed")
    nodes: int = Field(ge=0, description="schedulable nodes")
    room: int = Field(ge=0, description="members of that request that fit now, node by node")
    largest: int = Field(ge=0, description="the most allocatable on one schedulable node")
    requests: list[Annotated[int, Field(ge=0)]] | None = Field(
        default=None, description="the requests of the gang's members still to place, "
        "largest first, when they differ (a heterogeneous gang); room then counts how many "
        "of them fit now (first fit, largest first)")
    priority: int | None = Field(
        default=None, ge=PRIORITY_MIN, le=PRIORITY_MAX,
        description="the culprit's priority (spec.priority), when the producer knows it")
    room_preempting: int | None = Field(
        default=None, ge=0, description="members that would fit if the culprit's preemption "
        "evicted every pod of lower priority; null with a priority for preemptionPolicy Never "
        "(it preempts nothing)")


class CycleRecord(_Timed):
    """``gangstate.cycle/v1``: what the scheduler did with one gang member in one cycle.

    ``cycle`` is ``null`` when the scheduler's cycle number is unknown (a record derived from
    a scheduler Event); such a record must name its ``source`` Event (``source.uid``), which
    identifies the attempt."""

    model_config = ConfigDict(extra="allow", frozen=True, json_schema_extra={
        "if": {"properties": {"cycle": {"type": "null"}}, "required": ["cycle"]},
        "then": {"required": ["source"], "properties": {"source": {
            "type": "object", "required": ["uid"], "properties": {"uid": {"minLength": 1}}}}}})
    schema_: Literal["gangstate.cycle/v1"] = Field(alias="schema")
    scheduler: str = ""
    cycle: int | None = Field(ge=0, le=INT64_MAX, description="the scheduler's monotonic scheduling-attempt "
                                                "counter; null when unknown (a record derived "
                                                "from a scheduler Event, see source)")
    pod: PodRef
    gang: str = Field(pattern=r"^[^/]+/[^/]+$", json_schema_extra={"pattern": GANG_ID_VIEW_PATTERN})
    gang_group: str = ""
    stage: Stage
    status: CycleStatus
    reason: str = ""
    message: str = ""
    representative: str | None = None
    node: str | None = None
    source: EventSource | None = Field(
        default=None, description="the scheduler Event (or the pod's PodScheduled condition) "
                                  "the record was derived from; required (with its uid) when "
                                  "cycle is null")
    culprit: str | None = Field(
        default=None, pattern=r"^[^/]+/[^/]+$", json_schema_extra={"pattern": GANG_ID_VIEW_PATTERN},
        description="ns/name of the member whose failure to fit this outcome reports: the pod "
                    "itself for its own fit error, another member for a refusal or release "
                    "naming it; absent when unknown (optional since the catalogue of "
                    "scheduler messages)")
    fit_error: str | None = Field(
        default=None, description="the culprit's fit error as the scheduler wrote it, without "
                                  "PostFilter text (0/N nodes are available: ...); absent when "
                                  "unknown")
    already_wait_for_bound: int | None = Field(
        default=None, ge=0, description="members of the gang group that waited at Permit when "
                                        "the culprit failed (Koordinator's alreadyWaitForBound);"
                                        " absent when the message does not say")
    capacity: CapacityFacts | None = Field(
        default=None, description="what the cluster had of the culprit's short resource "
                                  "(its fit error says Insufficient <resource>), when the "
                                  "producer knows the nodes; absent otherwise")
    shim: str | None = Field(
        default=None, description="id of the scheduler shim that wrote the record (on every "
                                  "record the shim writes); absent for other producers")
    round: int | None = Field(
        default=None, ge=0, description="the shim's: cycle number in which the round (the gang "
                                        "scheduling context) this record belongs to was opened")
    rounds_skipped: int | None = Field(
        default=None, ge=0, description="the shim's: rounds of the gang group reported only as "
                                        "this count, since its previous detailed round")
    event: str | None = Field(
        default=None, description="the shim's: what the record marks besides an outcome "
                                  "(RepresentativeRecorded, RepresentativeCleared, RoundOpened, "
                                  "MemberHandedOut, RoundClosed, Allowed)")
    code: str | None = Field(
        default=None, description="the shim's: the scheduler framework's status code as "
                                  "written by the plugin (e.g. UnschedulableAndUnresolvable)")
    preemption: str | None = Field(
        default=None, description="what the message's PostFilter text says of preemption: "
                                  "victims-terminating, no-victims, not-helpful, not-eligible, "
                                  "preempting, other; absent when it says nothing")
    preemption_text: str | None = Field(
        default=None, description="that text as written (after 'preemption: ')")

    @field_validator("gang", "culprit")
    @classmethod
    def _gang_bounded(cls, value: str | None) -> str | None:
        return None if value is None else check_gang_id(value)

    @model_validator(mode="after")
    def _identified(self) -> "CycleRecord":
        if self.cycle is None and (self.source is None or not self.source.uid):
            raise ValueError("cycle is null (unknown) but no source.uid names the Event that "
                             "identifies the attempt")
        return self


class AckRecord(_Timed):
    """``gangstate.ack/v1``: the scheduler shim's answer to one command."""

    schema_: Literal["gangstate.ack/v1"] = Field(alias="schema")
    command_id: str = Field(min_length=1)
    gang_group: str = Field(min_length=1)
    epoch: int = Field(ge=1, le=INT64_MAX)
    outcome: AckOutcome
    representative: str | None = None
    reason: str | None = None
    """Why a ``Stale`` or ``PreconditionFailed`` command was not applied (``preemption in
    progress: ns/p-0 nominated to node-a``); absent on ``Applied`` and in older acks."""


class GangSummaryRecord(_Timed):
    """``gangstate.gang-summary/v1``: one gang (``gang``) telling another gang of its gang group
    (``to``, also the Kafka key) about itself. Written by the worker into ``gang-events``, so
    every gang's fold learns the state of the rest of its group in its own partition's order.
    (An extension of the v1 contracts; see docs/contracts.md.)"""

    schema_: Literal["gangstate.gang-summary/v1"] = Field(alias="schema")
    gang: str = Field(pattern=r"^[^/]+/[^/]+$", json_schema_extra={"pattern": GANG_ID_VIEW_PATTERN})
    to: str = Field(pattern=r"^[^/]+/[^/]+$", json_schema_extra={"pattern": GANG_ID_VIEW_PATTERN})
    gang_group: str = ""
    groups: list[str] = Field(default_factory=list)
    exists: bool
    initialized: bool
    members: int = Field(ge=0)
    min_member: int | None = None
    wanted_as_of: str | None = Field(
        default=None, description="RFC 3339: the sender asks for the receiver's summary as of "
                                  "at least this event time")
    once_satisfied: bool = Field(
        default=False, description="the sender's gang group was once satisfied (a member was "
                                   "bound); absent = false")

    @field_validator("gang", "to")
    @classmethod
    def _gang_bounded(cls, value: str) -> str:
        return check_gang_id(value)

    @field_validator("wanted_as_of")
    @classmethod
    def _wanted_rfc3339(cls, value: str | None) -> str | None:
        if value is not None:
            event_time(value)
        return value


class PreemptionRecord(_Timed):
    """``gangstate.preemption/v1``: kube-scheduler preempted a pod (the victim) for a member of
    the gang (``type`` ``Preempted``: the ``Preempted`` Event on the victim, ``Preempted by pod
    <preemptor uid> on node <node>``), or a victim of the gang's is gone (``Deleted``: its
    deletion completed). Keyed by the preemptor's gang. Written by the watch producer."""

    schema_: Literal["gangstate.preemption/v1"] = Field(alias="schema")
    gang: str = Field(pattern=r"^[^/]+/[^/]+$", json_schema_extra={"pattern": GANG_ID_VIEW_PATTERN})
    type: Literal["Preempted", "Deleted"]
    victim: PodRef
    node: str = Field(default="", description="the node the victim was preempted on")
    preemptor: PodRef = Field(description="the gang member the victim was preempted for")
    grace_period_seconds: int | None = Field(
        default=None, ge=0, le=INT64_MAX,
        description="the victim's deletion grace period, when the producer knows it")
    victim_bound: bool = Field(
        default=True, description="the victim was bound to a node (false: a pod waiting at "
                                  "Permit, rejected rather than deleted)")
    source: EventSource | None = Field(
        default=None, description="the Preempted Event (for type Preempted)")
    event_time: str | None = Field(
        default=None, description="RFC 3339: the Preempted Event's own time (eventTime, else "
                                  "lastTimestamp), when known")

    @field_validator("event_time")
    @classmethod
    def _event_rfc3339(cls, value: str | None) -> str | None:
        if value is not None:
            event_time(value)
        return value

    @field_validator("gang")
    @classmethod
    def _gang_bounded(cls, value: str) -> str:
        return check_gang_id(value)


class CapacityRecord(_Timed):
    """``gangstate.capacity/v1``: the cluster's room for the short resource of a gang changed
    while no scheduling attempt reports it (a Node added, removed or resized, a pod using the
    resource bound, finished or deleted). Written by the watch producer for the gangs whose
    failed attempts carried a ``capacity``, keyed by the gang: a gang held out of the
    scheduling queue has no attempts, and its release (rule H2) waits on this."""

    schema_: Literal["gangstate.capacity/v1"] = Field(alias="schema")
    gang: str = Field(pattern=r"^[^/]+/[^/]+$", json_schema_extra={"pattern": GANG_ID_VIEW_PATTERN})
    culprit: str = Field(pattern=r"^[^/]+/[^/]+$",
                         json_schema_extra={"pattern": GANG_ID_VIEW_PATTERN},
                         description="ns/name of the member whose request capacity counts, as "
                                     "in the failed attempt it follows")
    capacity: CapacityFacts

    @field_validator("gang")
    @classmethod
    def _gang_bounded(cls, value: str) -> str:
        return check_gang_id(value)


class TickRecord(_Timed):
    """``gangstate.tick/v1``: advances the event-time clock of one input partition."""

    schema_: Literal["gangstate.tick/v1"] = Field(alias="schema")


class RosterRecord(_Timed):
    """``gangstate.roster/v1``: the gang pods a watch producer knows, once a new process has
    published its first lists (a restart, a rollout): one record to each partition of
    ``gang-events``, naming every gang whose key lands on that partition with the uids of its
    pods. For each gang it names, the fold drops the members its list does not name (a pod
    deleted while no watch producer ran, which no ``DELETED`` will tell; docs/contracts.md);
    a gang it does not name is left as it is. No decode view: a few records per watch start
    go through this model."""

    schema_: Literal["gangstate.roster/v1"] = Field(alias="schema")
    partition: int = Field(ge=0, lt=PARTITIONS_MAX,
                           description="the gang-events partition this roster is for")
    partitions: int = Field(gt=0, le=PARTITIONS_MAX,
                            description="how many partitions gang-events has (the keys' "
                                        "murmur2 partition is taken modulo this)")
    gangs: dict[str, list[str]] = Field(
        description="gang id (ns/name, a native one's ns/name@kube-scheduler) -> the uids of "
                    "its pods the watch producer knows, in that cluster")

    @field_validator("gangs")
    @classmethod
    def _gangs_bounded(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for gang in value:
            if "/" not in gang:
                raise ValueError(f"gang id {gang!r} is not namespace/name")
            check_gang_id(gang)
        return value


InputRecord = Annotated[
    Union[KubeRecord, CycleRecord, AckRecord, GangSummaryRecord, TickRecord,
          PreemptionRecord, CapacityRecord, RosterRecord],
    Field(discriminator="schema_")
]
"""Any record of the ``gang-events`` input topic, told apart by its ``schema`` field."""

INPUT_ADAPTER: TypeAdapter[
    KubeRecord | CycleRecord | AckRecord | GangSummaryRecord | TickRecord | PreemptionRecord
    | CapacityRecord | RosterRecord
] = TypeAdapter(InputRecord)


# -- Decode views of the input models ------------------------------------------------------------
# ``streams.wire.decoding`` validates every input value first against these views: plain dicts with
# the same fields, types and constraints as the models above, except that what the models keep
# without checking (unknown fields, everything in a Kubernetes ``spec``/``status`` but the few
# fields the fold reads) is skipped instead of being built into Python objects, and the
# before/after validators are left to the decoder (``null`` labels, ``observed_at`` parsed once).
# They are no contract: they may only accept what the models accept (the decoder falls back to
# the models for anything the views reject, and for the models' error text);
# tests/test_decoding_views.py checks them against the models.

class _MetaView(TypedDict, total=False):
    name: Required[Annotated[str, Field(min_length=1, max_length=NAME_MAX_LENGTH)]]
    namespace: Annotated[str, Field(max_length=NAMESPACE_MAX_LENGTH)]
    uid: Required[Annotated[str, Field(min_length=1)]]
    resourceVersion: Annotated[str, Field(max_length=RV_MAX_LENGTH)]
    labels: dict[str, str] | None
    annotations: dict[str, str] | None
    creationTimestamp: str | None
    deletionTimestamp: str | None


class _SpecView(TypedDict, total=False):
    nodeName: Any  # Pod
    schedulingGates: Any  # Pod
    schedulerName: Any  # Pod
    schedulingGroup: Any  # Pod (native gangs)
    minMember: Any  # PodGroup
    scheduleTimeoutSeconds: Any  # PodGroup
    schedulingPolicy: Any  # native PodGroup
    parentCompositePodGroupName: Any  # native PodGroup


class _StatusView(TypedDict, total=False):
    phase: Any
    reason: Any
    nominatedNodeName: Any
    conditions: Any  # native PodGroup


class _ObjectView(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: Required[_MetaView]
    spec: _SpecView | None
    status: _StatusView | None


class _InputView(TypedDict):
    schema_: NotRequired[Any]
    """Not a field: the models' union also reads its tag from a ``schema_`` key when present
    (pydantic looks the discriminator up by field name, then by alias); the decoder leaves such
    a record to the models."""
    observed_at: str
    cluster: NotRequired[str]


class KubeView(_InputView):
    schema: Literal["gangstate.kube/v1"]
    resource: Resource
    type: WatchType
    object: _ObjectView


class _PodRefView(TypedDict):
    namespace: Annotated[str, Field(max_length=NAMESPACE_MAX_LENGTH)]
    name: Annotated[str, Field(min_length=1, max_length=NAME_MAX_LENGTH)]
    uid: NotRequired[str]


class _EventSourceView(TypedDict, total=False):
    kind: Literal["event", "condition"]
    event: str
    uid: str
    last_transition_time: str
    count: Annotated[int, Field(ge=1, le=INT64_MAX)]
    form: str
    truncated: bool


class _CapacityView(TypedDict):
    resource: Annotated[str, Field(min_length=1)]
    request: Annotated[int, Field(ge=0)]
    allocatable: Annotated[int, Field(ge=0)]
    free: Annotated[int, Field(ge=0)]
    nodes: Annotated[int, Field(ge=0)]
    room: Annotated[int, Field(ge=0)]
    largest: Annotated[int, Field(ge=0)]
    requests: NotRequired[list[Annotated[int, Field(ge=0)]] | None]
    priority: NotRequired[Annotated[int, Field(ge=PRIORITY_MIN, le=PRIORITY_MAX)] | None]
    room_preempting: NotRequired[Annotated[int, Field(ge=0)] | None]


class CycleView(_InputView):
    schema: Literal["gangstate.cycle/v1"]
    scheduler: NotRequired[str]
    cycle: Annotated[int, Field(ge=0, le=INT64_MAX)] | None
    pod: _PodRefView
    gang: Annotated[str, Field(pattern=GANG_ID_VIEW_PATTERN)]
    gang_group: NotRequired[str]
    stage: Stage
    status: CycleStatus
    reason: NotRequired[str]
    message: NotRequired[str]
    representative: NotRequired[str | None]
    node: NotRequired[str | None]
    source: NotRequired[_EventSourceView | None]
    culprit: NotRequired[Annotated[str, Field(pattern=GANG_ID_VIEW_PATTERN)] | None]
    fit_error: NotRequired[str | None]
    already_wait_for_bound: NotRequired[Annotated[int, Field(ge=0)] | None]
    capacity: NotRequired[_CapacityView | None]
    shim: NotRequired[str | None]
    round: NotRequired[Annotated[int, Field(ge=0)] | None]
    rounds_skipped: NotRequired[Annotated[int, Field(ge=0)] | None]
    event: NotRequired[str | None]
    code: NotRequired[str | None]
    preemption: NotRequired[str | None]
    preemption_text: NotRequired[str | None]


class AckView(_InputView):
    schema: Literal["gangstate.ack/v1"]
    command_id: Annotated[str, Field(min_length=1)]
    gang_group: Annotated[str, Field(min_length=1)]
    epoch: Annotated[int, Field(ge=1, le=INT64_MAX)]
    outcome: AckOutcome
    representative: NotRequired[str | None]
    reason: NotRequired[str | None]


class GangSummaryView(_InputView):
    schema: Literal["gangstate.gang-summary/v1"]
    gang: Annotated[str, Field(pattern=GANG_ID_VIEW_PATTERN)]
    to: Annotated[str, Field(pattern=GANG_ID_VIEW_PATTERN)]
    gang_group: NotRequired[str]
    groups: NotRequired[list[str]]
    exists: bool
    initialized: bool
    members: Annotated[int, Field(ge=0)]
    min_member: NotRequired[int | None]
    wanted_as_of: NotRequired[str | None]
    once_satisfied: NotRequired[bool]


class TickView(_InputView):
    schema: Literal["gangstate.tick/v1"]


class PreemptionView(_InputView):
    schema: Literal["gangstate.preemption/v1"]
    gang: Annotated[str, Field(pattern=GANG_ID_VIEW_PATTERN)]
    type: Literal["Preempted", "Deleted"]
    victim: _PodRefView
    node: NotRequired[str]
    preemptor: _PodRefView
    grace_period_seconds: NotRequired[Annotated[int, Field(ge=0, le=INT64_MAX)] | None]
    victim_bound: NotRequired[bool]
    source: NotRequired[_EventSourceView | None]
    event_time: NotRequired[str | None]


class CapacityView(_InputView):
    schema: Literal["gangstate.capacity/v1"]
    gang: Annotated[str, Field(pattern=GANG_ID_VIEW_PATTERN)]
    culprit: Annotated[str, Field(pattern=GANG_ID_VIEW_PATTERN)]
    capacity: _CapacityView


INPUT_VIEW: TypeAdapter[KubeView | CycleView | AckView | GangSummaryView | TickView
                        | PreemptionView | CapacityView] = \
    TypeAdapter(Annotated[Union[KubeView, CycleView, AckView, GangSummaryView, TickView,
                                PreemptionView, CapacityView],
                          Field(discriminator="schema")])
"""Decode views of the input records, told apart by ``schema`` (see above)."""

VIEWS: dict[type[BaseModel], Any] = {
    KubeRecord: KubeView, CycleRecord: CycleView, AckRecord: AckView,
    GangSummaryRecord: GangSummaryView, TickRecord: TickView,
    PreemptionRecord: PreemptionView, CapacityRecord: CapacityView,
    CapacityFacts: _CapacityView,
    ObjectMeta: _MetaView, RawObject: _ObjectView, PodRef: _PodRefView,
    EventSource: _EventSourceView,
}
"""Each input model (and nested model) -> its decode view; for the tests."""


class InvolvedObject(BaseModel):
    """An object a diagnostic is about: a member Pod or the gang's PodGroup. ``apiVersion``
    (optional): the object's API group and version when not the kind's default (``v1`` for a
    Pod, Koordinator's ``scheduling.sigs.k8s.io/v1alpha1`` for a PodGroup): a native PodGroup
    is ``scheduling.k8s.io/v1beta1``; the Event sink writes its ``involvedObject`` with it."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)
    kind: Literal["Pod", "PodGroup"]
    namespace: str
    name: str
    uid: str = ""
    api_version: str | None = Field(
        default=None, alias="apiVersion",
        description="the object's apiVersion when not the kind's default (v1 for a Pod, "
        "scheduling.sigs.k8s.io/v1alpha1 for a PodGroup): scheduling.k8s.io/v1beta1 for a "
        "native PodGroup")


class Diagnostic(_Record):
    """``gangstate.diagnostic/v1``: one finding, written to Kubernetes as an Event."""

    schema_: Literal["gangstate.diagnostic/v1"] = Field(alias="schema", default=DIAGNOSTIC_SCHEMA)
    id: str
    cluster: str = _cluster_field()
    observed_at: str
    gang: str
    gang_group: str
    type: Literal["Normal", "Warning"]
    reason: DiagnosticReason
    message: str
    involved: list[InvolvedObject]
    facts: dict[str, Any]


class Command(_Record):
    """``gangstate.command/v1``: an instruction to the scheduler shim, fenced by ``epoch``."""

    schema_: Literal["gangstate.command/v1"] = Field(alias="schema", default=COMMAND_SCHEMA)
    id: str
    cluster: str = _cluster_field()
    issued_at: str
    type: CommandType
    gang_group: str
    epoch: int = Field(ge=1)
    expected_representative: str | None
    representative: str
    reason: CommandReason
    cycle: int | None = None
    ttl_seconds: int | None = Field(
        default=None, ge=1, description="HoldGang: seconds the scheduler shim holds the gang "
        "group unless a HoldGang renews it (the hold lapses when gangstate falls silent)")
    message: str | None = Field(
        default=None, description="HoldGang: why gangstate holds the gang, for the shim's "
        "refusal status at PreEnqueue (\"gangstate holds gang group <g>: <message>\")")


DEAD_LETTER_HEAD_BYTES = 4096
"""Bytes of ``DeadLetter.value`` at most, as written in the dead letter: the JSON string's
content (escaped, UTF-8, without its quotes). A control character takes 6 bytes there
(``\\u0001``), a quote or a backslash 2, so a head of such bytes holds fewer raw bytes: 682 of
``\\x01``, 2,048 of ``"``. A base64 head is of at most 3,072 raw bytes (4,096 characters)."""
DEAD_LETTER_KEY_BYTES = 1024
"""Bytes of ``DeadLetter.key`` at most, as written in the dead letter (escaped, as above)."""
DEAD_LETTER_ERROR_BYTES = 2048
"""Bytes of ``DeadLetter.error`` at most, as written in the dead letter (escaped, as above;
a cut reason ends with ``…``)."""
DEAD_LETTER_MAX_BYTES = 8192
"""The largest dead letter, bytes, as the worker writes it (compact UTF-8 JSON). The three
bounds above make 7,168 bytes and the rest at most 675 (the field names, a topic name of 249
characters, Kafka's longest, which needs no escaping, 64-bit partition, offset and size, and a
``cluster`` of 63 characters): 7,843 in all."""


class DeadLetter(_Record):
    """``gangstate.dead-letter/v1``: a record that could not be folded, kept with the reason.

    ``observed_at`` is wall-clock time: dead letters are not fold outputs. ``value`` is the
    head of the raw bytes as UTF-8 text (cut at a character boundary), or base64 of the head
    when they are not UTF-8 (then ``value_encoding`` is ``base64``), at most
    ``DEAD_LETTER_HEAD_BYTES`` as written (JSON-escaped); ``value_size`` and ``value_sha256``
    describe the whole raw value, ``value_truncated`` says whether ``value`` is only its head.
    ``key`` is the raw key's head (at most ``DEAD_LETTER_KEY_BYTES`` as written), ``error`` the
    reason (at most ``DEAD_LETTER_ERROR_BYTES`` as written). A dead letter is thus at most
    ``DEAD_LETTER_MAX_BYTES`` (8,192) as compact JSON, whatever the record (docs/contracts.md,
    "Dead letters"). Dead letters written before the head and digest lack the three
    ``value_*`` fields and carry the whole value.
    """

    schema_: Literal["gangstate.dead-letter/v1"] = Field(alias="schema", default=DEAD_LETTER_SCHEMA)
    observed_at: str
    topic: str
    partition: int | None = None
    offset: int | None = None
    key: str | None = Field(default=None, description="the head of the raw key (at most 1024 "
                                                      "bytes as written, JSON-escaped)")
    value: str = Field(description="the head of the raw value (UTF-8 text, or base64), at most "
                                   "4096 bytes as written (JSON-escaped, UTF-8)")
    value_encoding: Literal["utf-8", "base64"] = "utf-8"
    value_size: int | None = Field(default=None, ge=0,
                                   description="bytes of the whole raw value")
    value_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$",
                                     description="sha256 of the whole raw value, hex")
    value_truncated: bool = Field(default=False,
                                  description="value holds only the head of the raw value")
    error: str = Field(description="why the record could not be folded, at most 2048 bytes as "
                                   "written (JSON-escaped)")
    cluster: str = Field(default=DEFAULT_CLUSTER, max_length=CLUSTER_MAX_LENGTH,
                         description="the cluster the record's key names (cluster_of_raw_key); "
                         "absent means \"default\"")


_SHORT_ESCAPES = frozenset("\b\f\n\r\t\"\\")


def _escaped_bytes(ch: str) -> int:
    """Bytes of character ``ch`` inside a JSON string as the worker writes it (pydantic_core's
    ``to_json``, like ``json.dumps(..., ensure_ascii=False)``): ``\\"``, ``\\\\`` and the short
    escapes 2, other control characters 6 (``\\u001f``), anything else its UTF-8 length."""
    if ch in _SHORT_ESCAPES:
        return 2
    o = ord(ch)
    if o < 0x20:
        return 6
    return 1 if o < 0x80 else 2 if o < 0x800 else 3 if o < 0x10000 else 4


def json_head(text: str, limit: int) -> str:
    """The longest prefix of ``text`` whose JSON string content (escaped, UTF-8, without the
    quotes) is at most ``limit`` bytes."""
    if len(text) * 6 <= limit:  # no character can take more than 6 bytes
        return text
    size = 0
    for i, ch in enumerate(text):
        size += _escaped_bytes(ch)
        if size > limit:
            return text[:i]
    return text


def _utf8_head(raw: bytes, limit: int) -> tuple[str, bool]:
    """The first ``limit`` bytes at most of ``raw`` as text, cut before a character split by
    the limit; ``(text, True)``, or ``("", False)`` when that head is not UTF-8."""
    head = raw[:limit]
    for cut in range(4 if len(raw) > limit else 1):  # a UTF-8 character has at most 4 bytes
        try:
            return head[:len(head) - cut].decode("utf-8"), True
        except UnicodeDecodeError:
            continue
    return "", False


def dead_letter(observed_at: str, topic: str, partition: int | None, offset: int | None,
                key: bytes | None, value: bytes | None, error: str) -> dict[str, Any]:
    """A ``gangstate.dead-letter/v1`` record (JSON-ready) for raw ``key``/``value`` that could
    not be folded because of ``error``: the head of the value, its size and sha256, the head
    of the key, the reason, each cut so that it is at most its bound as written
    (``DEAD_LETTER_HEAD_BYTES``, ``DEAD_LETTER_KEY_BYTES``, ``DEAD_LETTER_ERROR_BYTES``:
    bytes of the JSON-escaped string). ``cluster`` is the cluster the key names
    (``cluster_of_raw_key``), written outside ``default``. ``observed_at`` is the caller's (the
    worker's wall clock). Its compact JSON is at most ``DEAD_LETTER_MAX_BYTES`` (8,192) bytes."""
    raw = value or b""
    cluster = cluster_of_raw_key(key)
    text, utf8 = _utf8_head(raw, DEAD_LETTER_HEAD_BYTES)
    if utf8:
        encoding = "utf-8"
        text = json_head(text, DEAD_LETTER_HEAD_BYTES)
        truncated = len(text.encode("utf-8")) < len(raw)
    else:
        head = raw[:DEAD_LETTER_HEAD_BYTES // 4 * 3]  # base64: 4 characters per 3 bytes
        text, encoding, truncated = base64.b64encode(head).decode("ascii"), "base64", \
            len(head) < len(raw)
    key_text = None
    if key is not None:
        key_text = json_head(key[:DEAD_LETTER_KEY_BYTES].decode("utf-8", "replace"),
                             DEAD_LETTER_KEY_BYTES)
    error = error.encode("utf-8", "replace").decode("utf-8")  # no lone surrogate
    cut = json_head(error, DEAD_LETTER_ERROR_BYTES)
    if cut != error:
        cut = json_head(error, DEAD_LETTER_ERROR_BYTES - 3) + "…"  # 3 bytes in UTF-8
    return {
        "schema": DEAD_LETTER_SCHEMA, "observed_at": observed_at, "topic": topic,
        "partition": partition, "offset": offset, "key": key_text,
        "value": text, "value_encoding": encoding, "value_size": len(raw),
        "value_sha256": hashlib.sha256(raw).hexdigest(), "value_truncated": truncated,
        "error": cut,
        **({} if cluster == DEFAULT_CLUSTER else {"cluster": cluster}),
    }


ALL_MODELS: dict[str, type[BaseModel]] = {
    KUBE_SCHEMA: KubeRecord,
    CYCLE_SCHEMA: CycleRecord,
    ACK_SCHEMA: AckRecord,
    TICK_SCHEMA: TickRecord,
    PREEMPTION_SCHEMA: PreemptionRecord,
    CAPACITY_SCHEMA: CapacityRecord,
    ROSTER_SCHEMA: RosterRecord,
    SUMMARY_SCHEMA: GangSummaryRecord,
    COMMAND_SCHEMA: Command,
    DIAGNOSTIC_SCHEMA: Diagnostic,
    DEAD_LETTER_SCHEMA: DeadLetter,
}
"""Every contract model by its ``schema`` value."""


def json_schemas() -> dict[str, dict[str, Any]]:
    """Return the JSON Schema of every contract model, keyed by file name (``kube.v1.json``...).

    Used by ``gangstate schema`` and by the drift test; deterministic output.
    """
    out: dict[str, dict[str, Any]] = {}
    for schema_id, model in ALL_MODELS.items():
        short = schema_id.split(".", 1)[1].replace("/", ".")
        doc = model.model_json_schema(by_alias=True)
        doc["$id"] = f"https://gangstate.dev/schemas/{short}.json"
        doc["title"] = schema_id
        out[f"{short}.json"] = doc
    return out
