"""The demo's report: per case and gang, pod by pod, what the scheduler wrote beside what
gangstate writes.

Where it sits: the outermost shell, under ``streams/dev/demo.py``; pure (no Kafka, no API
server, no clock): it reads the replayed trace lines and the outputs read back (a
``FoldResult``) and returns text.

- *What the scheduler wrote*: the core/v1 Events of the trace's ``gangstate.kube/v1`` records
  (``resource: events``, the scheduler's own Events as the watcher published them), per pod
  (name and uid) and reason, each Event counted as often as it happened
  (``producers.watch.shapes.event_count``: ``series.count``, else ``count``, else 1; a
  relisted Event counts once, by uid).
- *What gangstate writes*: the diagnostics through the sink's own decisions, offline
  (``streams.events.recorder.written_offline``): one Event per (pod, reason, field) with its
  count and latest message, exactly what ``kubectl describe pod`` lists after the sink ran.

Must not: decide anything about gangs (the core's) or talk to any service.

Public API: :class:`Case`, :func:`cases_of`, :func:`scheduler_events`, :func:`report`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from producers.watch.scheduler_events import parse_scheduler_event
from producers.watch.shapes import event_count
from streams.core.spec import gang_of_pod
from streams.events.recorder import written_offline
from streams.query.answers import gang_row
from streams.wire.traces import FoldResult

PodKey = tuple[str, str, str]
"""A pod: ``(namespace, name, uid)``."""


@dataclass
class PodSeen:
    """One pod as the trace shows it: its gang, its last ``spec.nodeName``, whether its last
    record was a deletion, and when it first appeared (microsecond-free RFC 3339 text)."""

    gang: str | None
    node: str | None = None
    deleted: bool = False
    first_seen: str = ""


@dataclass
class SchedulerSaid:
    """The scheduler's Events on one pod: ``counts`` reason -> occurrences, ``latest`` the
    latest message (by the Event's own time, else its place in the trace)."""

    counts: Counter[str] = field(default_factory=Counter)
    latest: str = ""
    latest_at: str = ""


@dataclass
class Case:
    """One replayed trace: its folder name, its ``description`` (``expect.json``; empty when
    none), its gangs, pods and the scheduler's Events on them."""

    name: str
    description: str
    gangs: list[str]
    pods: dict[PodKey, PodSeen]
    scheduler: dict[PodKey, SchedulerSaid]


def _record(raw: bytes) -> dict[str, Any] | None:
    try:
        rec = json.loads(raw)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def scheduler_events(records: Iterable[Mapping[str, Any]],
                     pods: Mapping[PodKey, PodSeen]) -> dict[PodKey, SchedulerSaid]:
    """Per pod, the scheduler's Events in ``records`` (``gangstate.kube/v1`` dicts with
    ``resource: events``): reasons counted by ``event_count`` (the last count seen of each
    Event uid), the latest message of an attempt (``parse_scheduler_event``). An Event naming
    no uid is matched to the pod of its name."""
    by_name = {(ns, name): (ns, name, uid) for ns, name, uid in pods}
    counts: dict[PodKey, dict[str, tuple[str, int]]] = {}
    out: dict[PodKey, SchedulerSaid] = {}
    for rec in records:
        if rec.get("resource") != "events" or rec.get("type") == "DELETED":
            continue
        ev = rec.get("object") or {}
        inv = ev.get("involvedObject") or {}
        ns, name, uid = inv.get("namespace", ""), inv.get("name", ""), inv.get("uid", "")
        key = (ns, name, uid) if uid else by_name.get((ns, name), (ns, name, ""))
        ev_uid = (ev.get("metadata") or {}).get("uid") or id(ev)
        counts.setdefault(key, {})[str(ev_uid)] = (ev.get("reason") or "", event_count(ev))
        said = out.setdefault(key, SchedulerSaid())
        when = str(ev.get("eventTime") or ev.get("lastTimestamp") or rec.get("observed_at"))
        # the latest attempt's message: "skip schedule deleting pod" tells no attempt
        # (kube-scheduler v1.35.2 schedule_one.go:399-404; the catalogue's non-attempt row)
        attempt = parse_scheduler_event(ev.get("reason") or "", ev.get("message") or "",
                                        ns, name).attempt
        if attempt and when >= said.latest_at:
            said.latest, said.latest_at = ev.get("message") or "", when
    for key, by_uid in counts.items():
        out[key].counts = Counter()
        for reason, n in by_uid.values():
            out[key].counts[reason] += n
    return out


def cases_of(lines: Iterable[tuple[str, int, bytes]]) -> list[Case]:
    """The cases of a replayed log (``(file, line number, raw)``, as the demo publishes it),
    one per file in order of first appearance, with the pods and gangs each file names. A
    case's name and description come from the folder of its ``trace.jsonl`` and the
    ``expect.json`` beside it."""
    per_file: dict[str, list[dict[str, Any]]] = {}
    for path, _n, raw in lines:
        rec = _record(raw)
        if rec is not None:
            per_file.setdefault(path, []).append(rec)
    cases = []
    for path, records in per_file.items():
        pods: dict[PodKey, PodSeen] = {}
        gangs: list[str] = []
        for rec in records:
            if rec.get("resource") == "pods":
                obj = rec.get("object") or {}
                meta = obj.get("metadata") or {}
                ns = meta.get("namespace", "")
                key = (ns, meta.get("name", ""), meta.get("uid", ""))
                gang = gang_of_pod(ns, meta.get("labels") or {}, meta.get("annotations") or {})
                seen = pods.setdefault(key, PodSeen(gang, first_seen=rec.get("observed_at", "")))
                seen.node = (obj.get("spec") or {}).get("nodeName")
                seen.deleted = rec.get("type") == "DELETED"
                if gang and gang not in gangs:
                    gangs.append(gang)
            elif rec.get("resource") == "podgroups":
                meta = (rec.get("object") or {}).get("metadata") or {}
                gang = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
                if gang not in gangs:
                    gangs.append(gang)
        folder = Path(path).parent
        description = ""
        try:
            description = json.loads((folder / "expect.json").read_text()).get(
                "description", "")
        except (OSError, ValueError, AttributeError):
            pass
        cases.append(Case(folder.name, description, gangs, pods,
                          scheduler_events(records, pods)))
    return cases


def _cut(text: str, width: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _pod_label(key: PodKey, seen: PodSeen, twins: Counter[str]) -> str:
    """``name`` (with the uid's first 8 characters when another pod had the same name) and
    where it is: ``@node``, ``deleted`` or nothing while pending."""
    label = key[1] + (f" (uid {key[2][:8]})" if twins[key[1]] > 1 else "")
    if seen.deleted:
        return label + " deleted"
    return label + (f" @{seen.node}" if seen.node else "")


def report(cases: list[Case], result: FoldResult) -> str:
    """The demo's text: per case its description; per gang its row (phase, members, bound),
    what koord-scheduler wrote on its pods (reasons counted, per pod, and the latest message),
    what gangstate writes, pod by pod (pods to which it writes the same Events share one
    block: each Event's type, reason, count and message), and gangstate's commands."""
    ours: dict[PodKey, list[tuple[str, str, int, str]]] = {}
    for key, written in written_offline(result.diagnostics).items():
        ref = key.involved
        if ref.kind == "Pod":
            ours.setdefault((ref.namespace, ref.name, ref.uid), []).append(
                (key.type, key.reason, written.count, written.message))
    lines: list[str] = []
    for case in cases:
        lines.append(f"== {case.name}" + (f": {case.description}" if case.description else ""))
        for gang in case.gangs:
            state = result.states.get(gang)
            pods = sorted((k for k, p in case.pods.items() if p.gang == gang),
                          key=lambda k: (k[1], case.pods[k].first_seen))
            twins = Counter(name for _ns, name, _uid in pods)
            labels = {k: _pod_label(k, case.pods[k], twins) for k in pods}
            if state is not None:
                row = gang_row(state)
                lines.append(f"gang {gang}  phase={row['phase']}  members={row['members']}"
                             f"  minMember="
                             f"{row['min_member'] if row['min_member'] is not None else '?'}"
                             f"  bound={row['bound']}  pods: {', '.join(labels.values())}")
            else:
                lines.append(f"gang {gang}  (gone from the gang table)  pods: "
                             f"{', '.join(labels.values())}")
            total: Counter[str] = Counter()
            per_pod: dict[str, list[str]] = {}
            latest = ("", "")
            for key in pods:
                sched = case.scheduler.get(key)
                if not sched:
                    continue
                total.update(sched.counts)
                name = key[1] + (f" (uid {key[2][:8]})" if twins[key[1]] > 1 else "")
                for reason, n in sched.counts.items():
                    per_pod.setdefault(reason, []).append(f"{name} x{n}")
                if sched.latest_at >= latest[0]:
                    latest = (sched.latest_at, sched.latest)
            if total:
                said = "; ".join(f"{r} x{n} ({', '.join(per_pod[r])})"
                                 for r, n in sorted(total.items()))
                lines.append(f"  koord-scheduler wrote: {said}")
                lines.append(f"    latest: {_cut(latest[1])}")
            else:
                lines.append("  koord-scheduler wrote: nothing (no Event, no condition)")
            blocks: dict[tuple[tuple[str, str, int, str], ...], list[str]] = {}
            for key in pods:
                blocks.setdefault(tuple(ours.get(key, [])), []).append(labels[key])
            for events, names in blocks.items():
                if not events:
                    lines.append(f"  gangstate wrote on {', '.join(names)}: nothing")
                    continue
                lines.append(f"  gangstate wrote on {', '.join(names)}:")
                for type_, reason, count, message in events:
                    times = f" x{count}" if count > 1 else ""
                    lines.append(f"    {type_} {reason}{times}: {message}")
            group = state.gang_group if state is not None else gang
            for c in result.commands:
                if c["gang_group"] != group:
                    continue
                if c["type"] in ("HoldGang", "ReleaseGang", "ActivateGang"):
                    ttl = f", ttl {c['ttl_seconds']} s" if c.get("ttl_seconds") else ""
                    lines.append(f"  gangstate command: {c['type']} epoch {c['epoch']}: gang "
                                 f"group {group} ({c['reason']}{ttl})")
                else:
                    lines.append(f"  gangstate command: {c['type']} epoch {c['epoch']}: "
                                 f"{c['expected_representative'] or '-'} -> "
                                 f"{c['representative']} ({c['reason']})")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
