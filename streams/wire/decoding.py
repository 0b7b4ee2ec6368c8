"""Decoding: raw input bytes (a Kafka value or a trace line) -> a core record and its gang key.

Where it sits: between the wire and the core. The worker, ``gangstate fold`` and
``gangstate replay`` all decode through ``decode_input``, so the three paths accept and reject
exactly the same records. Validation is the contract's (``streams.wire.contracts``): the envelope and
the object metadata the fold reads; a record that fails raises ``DecodeError`` with the reason,
which the caller sends to the dead-letter topic (or reports with its line number).

Every value is first validated against the narrow decode views (``contracts.INPUT_VIEW``: the
same fields and constraints as the models, unknown fields skipped rather than built), about 2x
faster than the models; a value the views reject, or cannot vouch for, is decoded by the
contract models, which give the same record or the reason (tests/unit/test_decoding_views.py).

Must not: hold gang logic (membership rules live in ``streams.core.spec``).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from pydantic import ValidationError

from streams.wire.contracts import (ACK_SCHEMA, CAPACITY_SCHEMA, CYCLE_SCHEMA, INPUT_ADAPTER, INPUT_VIEW, KUBE_SCHEMA,
                                    LABEL_VALUE_MAX_LENGTH, LABEL_VALUE_RULE, NAME_MAX_LENGTH,
                                    PREEMPTION_SCHEMA, ROSTER_SCHEMA,
                                    SUBDOMAIN_RULE, SUMMARY_SCHEMA, TICK_SCHEMA,
                                    check_resource_version, event_time, name_too_long)
from streams.core.records import (AckObserved, Capacity, CapacityObserved, CycleObserved,
                                  GangSummarized,
                                  PodGroupObserved, PodObserved, PreemptionObserved, Record,
                                  RosterObserved, Tick)
from streams.core.cluster import DEFAULT_CLUSTER, cluster_problem
from streams.core.timefmt import format_time
from streams.core.native import (KUBE_SCHEDULER, NATIVE_SUFFIX, composite_key, gang_key,
                                 is_native_podgroup, native_gang_of_pod,
                                 settings_of_composite, settings_of_native_podgroup)
from streams.core.spec import (ANNOTATION_NAME, LABEL_MIN_AVAILABLE_DEPRECATED, LABEL_POD_GROUP,
                               LABEL_POD_GROUP_NAME_DEPRECATED, RawSettings, gang_of_pod,
                               settings_of_pod, settings_of_podgroup, waits_for_podgroup)


class DecodeError(ValueError):
    """A record that fails validation; ``str(err)`` is the reason, fit for a dead letter."""


class Decoded(NamedTuple):
    """A decoded input record (a named tuple: built once per input record, it is the cheapest
    immutable record Python has).

    ``key``: the key of the gang the record belongs to (gang group for acks; ``None`` for
    ticks): its id, prefixed with the record's ``cluster`` outside ``default``
    (``eu-1:team-a/llm``, ``streams.core.cluster.key_of``).
    ``record``: the core record, or ``None`` when the record is valid but concerns no gang
    (then ``skipped`` says why: ``no-gang`` for a pod of no gang, ``workloads`` for a native
    Workload (published for taps), ``events`` for a core/v1 Event,
    which the watch producer turns into cycle records).
    """

    key: str | None
    record: Record | None
    skipped: str | None = None


def _short(err: ValidationError) -> str:
    parts = []
    for e in err.errors(include_url=False)[:3]:
        loc = ".".join(str(p) for p in e["loc"])
        parts.append(f"{loc}: {e['msg']}" if loc else e["msg"])
    more = err.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


class _ByContract(Exception):
    """The decode view cannot vouch for this record: decode it through the contract models."""


MAX_VALUE_BYTES = 1024 * 1024
"""The largest input value decoded, bytes (1 MiB: Kafka's default ``max.message.bytes`` is
1048588, a record batch of one such value). A larger value is rejected before it is parsed
(docs/contracts.md, "Limits"), on every path (worker, ``gangstate fold``, replay)."""

MAX_SKEW_SECONDS = 60.0
"""How far an input record's ``observed_at`` may be ahead of its Kafka timestamp, seconds, by
default (``GANGSTATE_MAX_SKEW_SECONDS``; docs/contracts.md, "Limits")."""


def check_skew(at: int, reference: int | None, max_skew_micros: int) -> None:
    """Raise ``DecodeError`` when event time ``at`` is more than ``max_skew_micros`` ahead of
    ``reference`` (the record's Kafka timestamp; all in microseconds since the Unix epoch).
    ``reference`` ``None`` (unknown: a trace line, a Kafka timestamp of -1) checks nothing.

    The event-time clock of a partition only moves forward, to the latest ``observed_at`` it
    has folded, and fires every timer due by then: one record from 2099 would fire every
    timer of its partition at once and keep the clock there. Such a record is rejected instead
    (dead-lettered by the worker); a record behind its Kafka timestamp (a replay of an old
    trace, a producer catching up) is the normal case and is never rejected."""
    if reference is not None and reference >= 0 and at - reference > max_skew_micros:
        raise DecodeError(
            f"observed_at {format_time(at)} is {(at - reference) / 1e6:.0f} s ahead of its "
            f"Kafka timestamp {format_time(reference)} (at most {max_skew_micros / 1e6:g} s, "
            f"docs/contracts.md \"Limits\")")


def decode_input(raw: bytes | str | None, reference: int | None = None,
                 max_skew_micros: int = int(MAX_SKEW_SECONDS * 1_000_000)) -> Decoded:
    """Decode one ``gang-events`` value (JSON bytes or text) into a ``Decoded``.

    Raises ``DecodeError`` with a one-line reason when the value is null (``None``: a Kafka
    tombstone, ``invalid record: null value (tombstone)``), is over ``MAX_VALUE_BYTES``, is
    not JSON, has an unknown ``schema``, or fails the contract (missing fields, bad types, a
    bad ``observed_at``, numbers beyond the contract's bounds), or when ``reference`` (the
    record's Kafka timestamp, microseconds; ``None`` when there is none) is given and its
    ``observed_at`` is more than ``max_skew_micros`` ahead of it (``check_skew``).

    Fast path: the narrow decode view (``contracts.INPUT_VIEW``: plain dicts, unknown fields
    skipped). Whatever the view rejects or cannot vouch for goes through the contract models
    (``contracts.INPUT_ADAPTER``), which give the accepted record or the reason.
    """
    if raw is None:  # a Kafka tombstone: gang-events is no compacted topic, nobody deletes in it
        raise DecodeError("invalid record: null value (tombstone)")
    size = len(raw)
    if size > MAX_VALUE_BYTES:
        raise DecodeError(f"value of {size} bytes is over the {MAX_VALUE_BYTES}-byte bound "
                          f"(docs/contracts.md \"Limits\")")
    try:
        rec = _VIEW(raw)
        at = event_time(rec["observed_at"])
    except (ValidationError, ValueError):
        decoded = _by_contract(raw)
    else:
        cluster = rec.get("cluster")
        if "schema_" in rec or (cluster is not None and cluster not in _CLUSTERS
                                and not _known_cluster(cluster)):
            decoded = _by_contract(raw)
        else:
            try:
                decoded = _in_cluster(cluster, _FROM_VIEW[rec["schema"]](rec, at))
            except _ByContract:
                decoded = _by_contract(raw)
    if reference is not None and decoded.record is not None:
        check_skew(decoded.record.at, reference, max_skew_micros)
    return decoded


def _by_contract(raw: bytes | str) -> Decoded:
    try:
        model = INPUT_ADAPTER.validate_json(raw)
    except ValidationError as err:
        raise DecodeError(f"invalid record: {_short(err)}") from None
    rec = model.model_dump(by_alias=True)
    try:
        return _in_cluster(rec.get("cluster"),
                           _FROM_VIEW[rec["schema"]](rec, event_time(rec["observed_at"])))
    except _ByContract:  # pragma: no cover - the models accepted it: the view's checks pass
        raise DecodeError("invalid record: rejected by the decoder") from None


_CLUSTERS: set[str] = set()
"""Cluster ids the decoder has checked (``_known_cluster``); a fleet has few."""
CLUSTER_CACHE = 1024
"""Checked cluster ids kept at most (then the set starts over)."""


def _known_cluster(cluster: Any) -> bool:
    """True when ``cluster`` (a record's ``cluster`` field) is a valid cluster id
    (``cluster.cluster_problem``), remembered; a bad one goes to the models for the reason."""
    if cluster_problem(cluster) is not None:
        return False
    if len(_CLUSTERS) >= CLUSTER_CACHE:
        _CLUSTERS.clear()
    _CLUSTERS.add(cluster)
    return True


def _in_cluster(cluster: str | None, decoded: Decoded) -> Decoded:
    """``decoded`` with its key within ``cluster`` (``cluster.key_of``: ``eu-1:team-a/llm``);
    as it is for no cluster or ``default``. The record itself keeps the names its cluster
    uses: only the key (the fold's, the table's, Kafka's) says which cluster."""
    if cluster is None or cluster == DEFAULT_CLUSTER or decoded.key is None:
        return decoded
    return Decoded(f"{cluster}:{decoded.key}", decoded.record, decoded.skipped)  # key_of


def _tick(rec: dict[str, Any], at: int) -> Decoded:
    return Decoded(None, Tick(at, rec.get("cluster") or DEFAULT_CLUSTER))


def _roster(rec: dict[str, Any], at: int) -> Decoded:
    """A ``gangstate.roster/v1`` (only through the model: no decode view) as a
    ``RosterObserved``, keyed by nothing (it concerns every gang of its partition)."""
    if rec["partition"] >= rec["partitions"]:
        raise DecodeError(f"invalid record: partition {rec['partition']} of a topic of "
                          f"{rec['partitions']} partitions")
    return Decoded(None, RosterObserved(at, rec.get("cluster") or DEFAULT_CLUSTER,
                                        rec["partition"], rec["partitions"],
                                        {gang: frozenset(uids)
                                         for gang, uids in rec["gangs"].items()}))


def _cycle(rec: dict[str, Any], at: int) -> Decoded:
    pod = rec["pod"]
    gang = rec["gang"]
    get = rec.get
    cycle = rec["cycle"]
    attempt = ""
    source = get("source") or {}
    if cycle is None:  # identified by its source Event or condition (contracts: CycleRecord)
        if not source.get("uid"):
            raise _ByContract
        attempt = f"{source['uid']}#{source.get('count', 1)}"
    return Decoded(gang, CycleObserved(
        at, get("scheduler", ""), cycle, f"{pod['namespace']}/{pod['name']}",
        pod.get("uid", ""), gang, get("gang_group") or gang, rec["stage"], rec["status"],
        get("reason", ""), get("message", ""), get("representative"), get("node"), attempt,
        get("culprit"), get("fit_error"), get("already_wait_for_bound"),
        _capacity(get("capacity")), get("shim") or "", get("round"),
        get("rounds_skipped") or 0, from_condition=source.get("kind") == "condition",
        preemption=get("preemption")))


def _preemption(rec: dict[str, Any], at: int) -> Decoded:
    victim, preemptor = rec["victim"], rec["preemptor"]
    when = _optional_time(rec.get("event_time"))
    return Decoded(rec["gang"], PreemptionObserved(
        at, rec["type"], rec["gang"], f"{victim['namespace']}/{victim['name']}",
        victim.get("uid", ""), rec.get("node", ""),
        f"{preemptor['namespace']}/{preemptor['name']}", preemptor.get("uid", ""),
        rec.get("grace_period_seconds"), rec.get("victim_bound", True), when))


def _optional_time(raw: str | None) -> int | None:
    """An optional RFC 3339 time field of a record (``event_time``, ``wanted_as_of``) as event
    time (integer microseconds since the epoch); ``None`` when absent. One that ``event_time``
    cannot read breaks the contract (``_ByContract``)."""
    if raw is None:
        return None
    try:
        return event_time(raw)
    except ValueError:
        raise _ByContract from None


def _capacity(raw: dict[str, Any] | None) -> Capacity | None:
    if not raw:
        return None
    return Capacity(raw["resource"], raw["request"], raw["allocatable"], raw["free"],
                    raw["nodes"], raw["room"], raw["largest"],
                    tuple(raw.get("requests") or ()), raw.get("priority"),
                    raw.get("room_preempting"))


def _capacity_record(rec: dict[str, Any], at: int) -> Decoded:
    capacity = _capacity(rec["capacity"])
    if capacity is None:  # an empty object: the model rejects it with the reason
        raise _ByContract
    return Decoded(rec["gang"], CapacityObserved(at, rec["gang"], rec["culprit"], capacity))


def _summary(rec: dict[str, Any], at: int) -> Decoded:
    wanted = _optional_time(rec.get("wanted_as_of"))
    return Decoded(rec["to"], GangSummarized(
        at, rec["gang"], rec["to"], tuple(rec.get("groups", ())), rec["exists"],
        rec["initialized"], rec["members"], rec.get("min_member"), wanted,
        bool(rec.get("once_satisfied", False))))


def _ack(rec: dict[str, Any], at: int) -> Decoded:
    return Decoded(rec["gang_group"], AckObserved(
        at, rec["command_id"], rec["gang_group"], rec["epoch"], rec["outcome"],
        rec.get("representative"), rec.get("reason")))


POD_GANG_CACHE = 4096
"""Distinct pod label/annotation sets whose gang reading ``_kube`` keeps (then it starts over)."""
_POD_GANG: dict[tuple[Any, ...], tuple[Any, ...]] = {}
"""``(namespace, labels items, annotations items)`` -> ``(gang_of_pod, settings_of_pod,
waits_for_podgroup)``: pure functions of exactly these, and every pod of a gang (and every
record of a pod) carries the same ones, so a gang's pods are read once (about 1.2 µs of the
2.2 µs ``_kube`` took per record)."""


def _kube(rec: dict[str, Any], at: int) -> Decoded:
    resource = rec["resource"]
    if resource == "events":
        return Decoded(None, None, "events")
    obj = rec["object"]
    meta = obj["metadata"]
    try:
        check_resource_version(meta.get("resourceVersion", ""))
    except ValueError:
        raise _ByContract from None  # the models give the reason
    namespace = meta.get("namespace", "")
    if not namespace:
        raise DecodeError(f"invalid record: object.metadata.namespace: missing for a "
                          f"namespaced {resource} object {meta['name']!r}")
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    spec = obj.get("spec") or {}
    if resource == "podgroups":
        if is_native_podgroup(obj.get("apiVersion") or ""):
            group = gang_key(namespace, meta["name"], KUBE_SCHEDULER)
            return Decoded(group, PodGroupObserved(
                at, rec["type"], group, namespace, meta["name"], meta["uid"],
                meta.get("resourceVersion", ""), settings_of_native_podgroup(spec),
                podgroup_conditions((obj.get("status") or {}).get("conditions"))))
        group = f"{namespace}/{meta['name']}"
        return Decoded(group, PodGroupObserved(
            at, rec["type"], group, namespace, meta["name"], meta["uid"],
            meta.get("resourceVersion", ""), settings_of_podgroup(spec, annotations)))
    if resource == "compositepodgroups":
        group = composite_key(namespace, meta["name"])
        return Decoded(group, PodGroupObserved(
            at, rec["type"], group, namespace, meta["name"], meta["uid"],
            meta.get("resourceVersion", ""), settings_of_composite(spec),
            podgroup_conditions((obj.get("status") or {}).get("conditions"))))
    if resource == "workloads":
        return Decoded(None, None, resource)
    native = native_gang_of_pod(namespace, spec)
    if native is not None:
        reason = name_too_long(native.partition("/")[2][:-len(NATIVE_SUFFIX)],
                               "PodGroup name", NAME_MAX_LENGTH, SUBDOMAIN_RULE)
        if reason is not None:
            raise DecodeError(f"invalid record: object.spec.schedulingGroup.podGroupName: "
                              f"{reason}")
    key = (namespace, tuple(labels.items()), tuple(annotations.items()))
    read = _POD_GANG.get(key) if native is None else (native, _NATIVE_SETTINGS, True)
    if read is None:
        check_gang_names(labels, annotations)
        read = (gang_of_pod(namespace, labels, annotations),
                settings_of_pod(labels, annotations), waits_for_podgroup(labels))
        if len(_POD_GANG) >= POD_GANG_CACHE:
            _POD_GANG.clear()
        _POD_GANG[key] = read
    gang, settings, waits = read
    if gang is None:
        return Decoded(None, None, "no-gang")
    node = spec.get("nodeName") or None
    status = obj.get("status") or {}
    phase = status.get("phase") or ""
    status_reason = status.get("reason") or ""
    if not isinstance(node, (str, type(None))) or not isinstance(phase, str):
        raise DecodeError("invalid record: object.spec.nodeName and object.status.phase must "
                          "be strings")
    if not isinstance(status_reason, str):
        raise DecodeError("invalid record: object.status.reason must be a string")
    nominated = (obj.get("status") or {}).get("nominatedNodeName") or None
    if not isinstance(nominated, (str, type(None))):
        raise DecodeError("invalid record: object.status.nominatedNodeName must be a string")
    return Decoded(gang, PodObserved(
        at, rec["type"], gang, namespace, meta["name"], meta["uid"],
        meta.get("resourceVersion", ""), node, phase, meta.get("deletionTimestamp") is not None,
        settings, waits, scheduling_gates(spec.get("schedulingGates")), status_reason,
        nominated_node=nominated))


_NATIVE_SETTINGS = RawSettings()
"""A native gang member's own settings: none (kube-scheduler reads its gang's only from the
PodGroup, ``streams.core.native``)."""


def podgroup_conditions(raw: Any) -> tuple[str, ...]:
    """A native PodGroup's ``status.conditions`` as ``Type=Status`` or ``Type=Status/Reason``
    strings, in the order written (``PodGroupObserved.conditions``); ``()`` when absent.
    Raises ``DecodeError`` when it is not a list of objects with string ``type`` and
    ``status`` (the API server never sends that)."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(
            isinstance(c, dict) and isinstance(c.get("type"), str)
            and isinstance(c.get("status"), str) for c in raw):
        raise DecodeError("invalid record: object.status.conditions must be a list of objects "
                          "with a string type and status")
    return tuple(f"{c['type']}={c['status']}" + (f"/{c['reason']}" if c.get("reason") else "")
                 for c in raw)


GANG_LABELS = (LABEL_POD_GROUP, LABEL_POD_GROUP_NAME_DEPRECATED, LABEL_MIN_AVAILABLE_DEPRECATED)
"""The labels of a pod that the fold reads (its gang's name, min-available)."""


def check_gang_names(labels: dict[str, str], annotations: dict[str, str]) -> None:
    """Raise ``DecodeError`` when a pod's gang is named longer than Kubernetes allows: a
    label of ``GANG_LABELS`` over ``LABEL_VALUE_MAX_LENGTH`` (63; the API server refuses such
    a pod), or, when no such label names the gang, the annotation
    ``gang.scheduling.koordinator.sh/name`` over ``NAME_MAX_LENGTH`` (253: Koordinator v1.8.0
    does not bound it, but the gang it names is a PodGroup's, a DNS-1123 subdomain). The
    reason names the field, its length and the limit (docs/contracts.md, "Limits")."""
    for label in GANG_LABELS:
        reason = name_too_long(labels.get(label) or "", "label value",
                               LABEL_VALUE_MAX_LENGTH, LABEL_VALUE_RULE)
        if reason is not None:
            raise DecodeError(f"invalid record: object.metadata.labels.{label}: {reason}")
    if not (labels.get(LABEL_POD_GROUP) or labels.get(LABEL_POD_GROUP_NAME_DEPRECATED)):
        reason = name_too_long(annotations.get(ANNOTATION_NAME) or "", "gang name",
                               NAME_MAX_LENGTH, SUBDOMAIN_RULE + ", as a PodGroup's")
        if reason is not None:
            raise DecodeError(f"invalid record: object.metadata.annotations.{ANNOTATION_NAME}: "
                              f"{reason}")


def scheduling_gates(raw: Any) -> tuple[str, ...]:
    """The names of a Pod's ``spec.schedulingGates`` (``[{"name": ...}, ...]``), in the order
    written; ``()`` when the field is absent, ``null`` or empty. Raises ``DecodeError`` when it
    is not a list of objects with a string ``name`` (the API server never sends that)."""
    if raw is None:
        return ()
    if isinstance(raw, list) and all(isinstance(g, dict) and isinstance(g.get("name"), str)
                                     for g in raw):
        return tuple(g["name"] for g in raw)
    raise DecodeError("invalid record: object.spec.schedulingGates must be a list of objects "
                      "with a string name")


_VIEW = INPUT_VIEW.validator.validate_json
_FROM_VIEW: dict[str, Callable[[dict[str, Any], int], Decoded]] = {
    KUBE_SCHEMA: _kube, CYCLE_SCHEMA: _cycle, ACK_SCHEMA: _ack, SUMMARY_SCHEMA: _summary,
    TICK_SCHEMA: _tick, PREEMPTION_SCHEMA: _preemption, CAPACITY_SCHEMA: _capacity_record,
    ROSTER_SCHEMA: _roster,
}
