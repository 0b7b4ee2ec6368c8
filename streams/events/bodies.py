"""Kubernetes Event bodies: a decision rendered as the request the sink sends, and an Event read
back as what it says (pure).

Where it sits: between the recorder's decisions (``streams.events.recorder``) and the sink
(``streams.events.sink``), which sends what ``render`` returns. ``core/v1`` bodies carry count,
firstTimestamp and lastTimestamp; ``events.k8s.io/v1`` bodies carry a series instead. The
annotations record which diagnostics an Event already counted, so that a restarted sink
(``written_from_event``) can tell a repeat from news.

Must not: talk to the API, read the wall clock, or import the ``kubernetes`` package.
"""

from __future__ import annotations

from typing import Any, Mapping

from streams.core.timefmt import format_time, parse_time
from streams.events.recorder import (ACTION, ANNOTATION_GANG, ANNOTATION_IDS, ANNOTATION_LAST_AT,
                                     ANNOTATION_LAST_ID, Api, Create, EventKey, Patch, Written)


def _seconds(micros: int) -> str:
    """``metav1.Time``: RFC 3339 in whole seconds (what core/v1 timestamps keep)."""
    return format_time(micros - micros % 1_000_000)[:19] + "Z"


def _annotations(state: Written) -> dict[str, str]:
    out = {ANNOTATION_LAST_ID: state.ids[-1], ANNOTATION_LAST_AT: format_time(state.last_at),
           ANNOTATION_IDS: ",".join(state.ids)}
    if state.gang:
        out[ANNOTATION_GANG] = state.gang
    return out


def core_v1_event(key: EventKey, state: Written, instance: str) -> dict[str, Any]:
    """The core/v1 Event to create for ``state``: ``involvedObject``, ``type``, ``reason``,
    ``message``, ``count``, ``firstTimestamp``/``lastTimestamp`` (event time, whole seconds),
    ``source.component`` and ``reportingComponent`` = the key's component,
    ``reportingInstance`` = ``instance`` (at most 128 characters), and the dedupe annotations.
    No ``eventTime``, as client-go ``tools/record`` ``makeEvent``."""
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": state.name, "namespace": state.namespace,
                     "annotations": _annotations(state)},
        "involvedObject": key.involved.to_json(),
        "type": key.type, "reason": key.reason, "message": state.message,
        "count": state.count,
        "firstTimestamp": _seconds(state.first_at), "lastTimestamp": _seconds(state.last_at),
        "source": {"component": key.component},
        "reportingComponent": key.component, "reportingInstance": instance[:128],
    }


def core_v1_patch(state: Written) -> dict[str, Any]:
    """The strategic-merge patch that moves a core/v1 Event to ``state``: ``count``,
    ``lastTimestamp``, ``message`` and the annotations (client-go ``eventObserve`` patches the
    same fields)."""
    return {"count": state.count, "lastTimestamp": _seconds(state.last_at),
            "message": state.message, "metadata": {"annotations": _annotations(state)}}


def events_v1_event(key: EventKey, state: Written, instance: str) -> dict[str, Any]:
    """The events.k8s.io/v1 Event for ``state``: ``regarding``, ``type``, ``reason``, ``note``,
    ``eventTime`` = first occurrence (MicroTime), ``action`` = ``ACTION``,
    ``reportingController`` / ``reportingInstance``, and ``series`` {count, lastObservedTime}
    once ``count >= 2`` (the API requires series.count >= 2)."""
    body: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": state.name, "namespace": state.namespace,
                     "annotations": _annotations(state)},
        "regarding": key.involved.to_json(),
        "type": key.type, "reason": key.reason, "note": state.message, "action": ACTION,
        "eventTime": format_time(state.first_at),
        "reportingController": key.component, "reportingInstance": instance[:128],
    }
    if state.count >= 2:
        body["series"] = {"count": state.count, "lastObservedTime": format_time(state.last_at)}
    return body


def events_v1_patch(state: Written) -> dict[str, Any]:
    """The strategic-merge patch for events.k8s.io/v1: ``series`` and the annotations only.
    ``note`` is immutable through events.k8s.io/v1 (``ValidateEventUpdate``), so the Event keeps
    the message it was created with."""
    return {"series": {"count": state.count, "lastObservedTime": format_time(state.last_at)},
            "metadata": {"annotations": _annotations(state)}}


def render(api: Api, decision: Create | Patch, instance: str) -> dict[str, Any]:
    """The body of a create (full Event) or of a patch, for ``api``."""
    if isinstance(decision, Create):
        return (core_v1_event if api == "core/v1" else events_v1_event)(
            decision.key, decision.state, instance)
    return (core_v1_patch if api == "core/v1" else events_v1_patch)(decision.state)


def _micros(text: Any) -> int | None:
    try:
        return parse_time(text) if isinstance(text, str) and text else None
    except ValueError:
        return None


def written_from_event(obj: Mapping[str, Any]) -> Written:
    """Read an Event (core/v1 or events.k8s.io/v1 JSON) back into a ``Written``.

    The annotations written by ``render`` give the exact last time and the ids counted; an
    Event without them (written by something else) is read from ``count``/``series`` and the
    timestamps, with no ids. Raises ``KeyError`` when ``metadata.name`` is missing."""
    meta = obj.get("metadata") or {}
    notes = meta.get("annotations") or {}
    series = obj.get("series") or {}
    count = int(series.get("count") or obj.get("count") or obj.get("deprecatedCount") or 1)
    first = (_micros(obj.get("eventTime")) or _micros(obj.get("firstTimestamp"))
             or _micros(obj.get("deprecatedFirstTimestamp")) or 0)
    last = (_micros(notes.get(ANNOTATION_LAST_AT)) or _micros(series.get("lastObservedTime"))
            or _micros(obj.get("lastTimestamp")) or first)
    ids = tuple(i for i in (notes.get(ANNOTATION_IDS) or "").split(",") if i)
    message = obj.get("message") if "message" in obj else obj.get("note", "")
    return Written(meta["name"], meta.get("namespace", ""), count, first, last, ids,
                   message or "", notes.get(ANNOTATION_GANG, ""))
