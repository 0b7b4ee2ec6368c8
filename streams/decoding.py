"""Decoding: raw input bytes (a Kafka value or a trace line) -> a core record and its gang key.

Where it sits: between the wire and the core. The worker, ``gangstate fold`` and
``gangstate replay`` all decode through ``decode_input``, so the three paths accept and reject
exactly the same records. Validation is the contract's (``streams.contracts``): the envelope and
the object metadata the fold reads; a record that fails raises ``DecodeError`` with the reason,
which the caller sends to the dead-letter topic (or reports with its line number).

Must not: hold gang logic (membership rules live in ``streams.core.spec``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from .contracts import (INPUT_ADAPTER, AckRecord, CycleRecord, GangSummaryRecord, KubeRecord,
                        TickRecord, parse_time)
from .core.records import (AckObserved, CycleObserved, GangSummarized, PodGroupObserved,
                           PodObserved, Record, Tick)
from .core.spec import gang_of_pod, settings_of_pod, settings_of_podgroup, waits_for_podgroup


class DecodeError(ValueError):
    """A record that fails validation; ``str(err)`` is the reason, fit for a dead letter."""


@dataclass(frozen=True, slots=True)
class Decoded:
    """A decoded input record.

    ``key``: the gang id the record belongs to (gang group id for acks; ``None`` for ticks).
    ``record``: the core record, or ``None`` when the record is valid but concerns no gang
    (then ``skipped`` says why: ``no-gang`` for a pod of no gang, ``events`` for a core/v1 Event,
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


def decode_input(raw: bytes | str) -> Decoded:
    """Decode one ``gang-events`` value (JSON bytes or text) into a ``Decoded``.

    Raises ``DecodeError`` with a one-line reason when the value is not JSON, has an unknown
    ``schema``, or fails the contract (missing fields, bad types, a bad ``observed_at``).
    """
    try:
        rec = INPUT_ADAPTER.validate_json(raw)
    except ValidationError as err:
        raise DecodeError(f"invalid record: {_short(err)}") from None
    if isinstance(rec, TickRecord):
        return Decoded(None, Tick(parse_time(rec.observed_at)))
    if isinstance(rec, CycleRecord):
        return Decoded(rec.gang, _cycle(rec))
    if isinstance(rec, GangSummaryRecord):
        return Decoded(rec.to, GangSummarized(
            parse_time(rec.observed_at), rec.gang, rec.to, tuple(rec.groups), rec.exists,
            rec.initialized, rec.members, rec.min_member,
            None if rec.wanted_as_of is None else parse_time(rec.wanted_as_of)))
    if isinstance(rec, AckRecord):
        return Decoded(rec.gang_group, AckObserved(
            parse_time(rec.observed_at), rec.command_id, rec.gang_group, rec.epoch,
            rec.outcome, rec.representative))
    return _kube(rec)


def _cycle(rec: CycleRecord) -> CycleObserved:
    return CycleObserved(
        at=parse_time(rec.observed_at), scheduler=rec.scheduler, cycle=rec.cycle,
        pod=f"{rec.pod.namespace}/{rec.pod.name}", pod_uid=rec.pod.uid, gang=rec.gang,
        gang_group=rec.gang_group or rec.gang, stage=rec.stage, status=rec.status,
        reason=rec.reason, message=rec.message, representative=rec.representative,
        node=rec.node)


def _kube(rec: KubeRecord) -> Decoded:
    obj = rec.object
    meta = obj.metadata
    at = parse_time(rec.observed_at)
    if rec.resource == "events":
        return Decoded(None, None, "events")
    if not meta.namespace:
        raise DecodeError(f"invalid record: object.metadata.namespace: missing for a "
                          f"namespaced {rec.resource} object {meta.name!r}")
    if rec.resource == "podgroups":
        gang = f"{meta.namespace}/{meta.name}"
        return Decoded(gang, PodGroupObserved(
            at, rec.type, gang, meta.namespace, meta.name, meta.uid, meta.resourceVersion,
            settings_of_podgroup(obj.spec, meta.annotations)))
    gang = gang_of_pod(meta.namespace, meta.labels, meta.annotations)
    if gang is None:
        return Decoded(None, None, "no-gang")
    node = obj.spec.get("nodeName") or None
    phase = obj.status.get("phase") or ""
    if not isinstance(node, (str, type(None))) or not isinstance(phase, str):
        raise DecodeError("invalid record: object.spec.nodeName and object.status.phase must "
                          "be strings")
    return Decoded(gang, PodObserved(
        at, rec.type, gang, meta.namespace, meta.name, meta.uid, meta.resourceVersion, node,
        phase, meta.deletionTimestamp is not None, settings_of_pod(meta.labels, meta.annotations),
        waits_for_podgroup(meta.labels)))
