"""Post-mortems from a cluster dump: ``kubectl get nodes,pods,podgroups,events -o json`` (one
Kubernetes ``List``, gzipped or not; on a cluster with Kubernetes' own gang scheduling name both
PodGroup APIs and the native objects, ``kubectl get nodes,pods,podgroups.scheduling.k8s.io,
podgroups.scheduling.sigs.k8s.io,compositepodgroups,workloads,events -o json``: the items'
``kind`` and ``apiVersion`` tell them apart) turned into the records the watch producer would have
published, so every command that takes a trace (``gangstate fold``, ``--from`` of ``get``,
``describe`` and ``explain``, ``replay``) also explains an incident from a dump of any cluster.

Where it sits: beside ``producers.watch``, whose routing it reuses (``GangRouter``: pods to
gangs, scheduler Events to ``gangstate.cycle/v1`` records), so a dump and a live watch give the
same records. Pure apart from reading the file: the records' event time comes from the objects
(a Pod's and a PodGroup's ``creationTimestamp``; an Event's ``eventTime``, ``lastTimestamp``,
``firstTimestamp`` or ``creationTimestamp``; a pod's failed ``PodScheduled`` condition, read
as a cycle record like a live watch reads it (``producers.watch.conditions``), its
``lastTransitionTime``, when the pod first failed: the message is the latest attempt's, and
the only word of the scheduler left once its Events expired), never from the clock.

What a dump cannot tell: it is a snapshot, so each Pod and PodGroup appears once, in its final
state, at its creation time (a pod bound later reads as bound from the start; deleted objects
are absent), and only Events the API server still kept (1 h by default) are there. Events of
pods that are not in the dump (an earlier incarnation of the same name) are dropped as the live
watcher drops them (``pod-gone``). Nodes and the pods bound to them (any scheduler's) fill the
per-node cache as they were at the end, so a gang short of a resource is told how much the
cluster has (``cycle/v1`` ``capacity``).

A dump is of one cluster, which it does not name: ``trace_lines(path, cluster)`` gives its
records that cluster (``gangstate fold --cluster``, ``gangstate replay --cluster``), as the
cluster's watch would have (``producers.clusters``); without it they are of ``default``. A
JSON-lines trace keeps the cluster each record names, and only its records without one are
given ``cluster``.

Must not: decide anything about gangs (that is the core's).
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from producers.clusters import in_cluster, line_in_cluster
from producers.watch.conditions import POD_SCHEDULED, failed_condition
from producers.watch.plan import DEFAULT_SCHEDULERS
from producers.watch.routing import DeadLetter, Drop, GangRouter, Publish
from streams.core.cluster import DEFAULT_CLUSTER
from streams.core.timefmt import parse_time

_GZIP_MAGIC = b"\x1f\x8b"
#: the order of objects that share a timestamp: the gang's spec first (a Workload, a
#: CompositePodGroup, a PodGroup of either API), then its pods, then what the scheduler said
#: about them (its Events, then the pods' own PodScheduled conditions)
_ORDER = {"Workload": 0, "CompositePodGroup": 0, "PodGroup": 0, "Pod": 1, "Event": 2,
          "Condition": 3}
#: the record resource of each kind a dump's records are made of (a PodGroup of either API:
#: its apiVersion tells Koordinator's from Kubernetes' own, ``routing.podgroup_key``)
_RESOURCES = {"Pod": "pods", "PodGroup": "podgroups", "CompositePodGroup": "compositepodgroups",
              "Workload": "workloads", "Event": "events"}


class DumpError(ValueError):
    """The file is neither a JSON-lines trace nor a Kubernetes ``List`` (the message says
    which and why)."""


@dataclass
class DumpRecords:
    """The records of a dump, in event-time order; what was left out, by reason
    (``other-kind``, ``other-scheduler``, ``no-gang``, ``pod-gone``, ...); and what fed the
    per-node cache without becoming records (``used``: ``nodes``)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    used: Counter[str] = field(default_factory=Counter)


def read_dump(path: Path) -> dict[str, Any] | None:
    """The Kubernetes ``List`` in ``path`` (gzipped or not, pretty or on one line, detected by
    content), or ``None`` when the file is a JSON-lines trace (its first non-blank line is a
    whole JSON object that is not a ``List``).
    Raises ``DumpError`` for a file that is neither, ``OSError`` when unreadable."""
    with open(path, "rb") as handle:
        if handle.read(2) == _GZIP_MAGIC:
            try:
                raw = gzip.decompress(_GZIP_MAGIC + handle.read())
            except (OSError, EOFError) as err:
                raise DumpError(f"{path}: a broken gzip file ({err})") from None
        else:
            handle.seek(0)
            head = b""
            for line in handle:  # a trace is told by its first line alone: no more is read
                head += line
                if line.strip():
                    try:
                        first = json.loads(line)
                    except ValueError:
                        break
                    if isinstance(first, dict) and not _is_list(first):
                        return None  # a JSON-lines trace (a compact List on one line is a dump)
                    break
            raw = head + handle.read()
    try:
        doc = json.loads(raw)
    except ValueError as err:
        raise DumpError(f"{path}: neither a JSON-lines trace nor a Kubernetes List "
                        f"(JSON: {err})") from None
    if not _is_list(doc):
        raise DumpError(f"{path}: a JSON document, but not a Kubernetes List (kind "
                        f"{doc.get('kind') if isinstance(doc, dict) else type(doc).__name__!r}"
                        f"); give `kubectl get nodes,pods,podgroups,events -o json` output")
    return doc


def _is_list(doc: Any) -> bool:
    """A Kubernetes ``List`` (``kind`` ending in ``List``, with ``items``)."""
    return (isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List")
            and isinstance(doc.get("items"), list))


def _when(obj: dict[str, Any]) -> int | None:
    meta = obj.get("metadata") or {}
    if obj.get("kind") == "Event":
        series = obj.get("series") or {}
        candidates = [series.get("lastObservedTime"), obj.get("lastTimestamp"),
                      obj.get("eventTime"), obj.get("firstTimestamp"),
                      meta.get("creationTimestamp")]
    else:
        candidates = [meta.get("creationTimestamp")]
    for value in candidates:
        if isinstance(value, str) and value:
            try:
                return parse_time(value)
            except ValueError:
                continue
    return None


def records_of_dump(doc: dict[str, Any],
                    scheduler_names: tuple[str, ...] = DEFAULT_SCHEDULERS) -> DumpRecords:
    """The records a watch of the dumped cluster would have published (``gangstate.kube/v1``
    for gang pods, PodGroups of both APIs, native CompositePodGroups and Workloads, and
    scheduler Events; ``gangstate.cycle/v1`` derived from each Event), ordered by event time
    (Workloads, CompositePodGroups and PodGroups, then Pods, then Events on a tie). Objects with no
    usable time are skipped (``no-time``). Shapes: ``doc`` is a ``List`` with ``items``;
    ``scheduler_names`` the schedulers whose pods count, as ``gangstate watch
    --scheduler-name``. Deterministic."""
    out = DumpRecords()
    timeline: list[tuple[int, int, int, str, dict[str, Any]]] = []
    nodes: list[dict[str, Any]] = []
    bound: list[dict[str, Any]] = []
    for index, item in enumerate(doc.get("items") or []):
        if not isinstance(item, dict):
            out.skipped["not-an-object"] += 1
            continue
        kind = item.get("kind")
        if kind == "Node":
            nodes.append(item)
            continue
        if kind == "Pod" and (item.get("spec") or {}).get("nodeName"):
            bound.append(item)  # holds its requests on its node, whichever its scheduler
        if kind not in _RESOURCES:
            out.skipped["other-kind"] += 1
            continue
        if kind == "Pod" and (item.get("spec") or {}).get("schedulerName") not in scheduler_names:
            out.skipped["other-scheduler"] += 1
            continue
        if not (item.get("metadata") or {}).get("uid") and kind != "Event":
            out.skipped["no-uid"] += 1
            continue
        at = _when(item)
        if at is None:
            out.skipped["no-time"] += 1
            continue
        resource = _RESOURCES[kind]
        timeline.append((at, _ORDER[kind], index, resource, item))
        condition = failed_condition(item) if kind == "Pod" else None
        if condition is not None:
            # the pod's PodScheduled=False condition (the latest attempt's message) at its
            # lastTransitionTime, when the pod first failed (kube-scheduler keeps that time
            # while the status stays False: producers.watch.conditions); never before the pod
            try:
                since = parse_time(str(condition.get("lastTransitionTime") or ""))
            except ValueError:
                since = at
            timeline.append((max(at, since), _ORDER["Condition"], index, "conditions", item))
    timeline.sort(key=lambda entry: entry[:3])
    router = GangRouter(scheduler_names=scheduler_names)
    # the snapshot's Nodes and bound pods make the room the cycle records report (the dump
    # has no history of them: as they were at the end, for the whole dump)
    for node in nodes:
        router.route("nodes", "ADDED", node, None, 0)
    for pod in bound:
        router.route("boundpods", "ADDED", pod, None, 0)
    if nodes:
        out.used["nodes"] = len(nodes)

    def perform(actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, Publish):
                out.records.append(action.record)
            elif isinstance(action, Drop):
                out.skipped[action.reason] += 1
            elif isinstance(action, DeadLetter):
                out.skipped[f"malformed-{action.reason}"] += 1

    for at, _order, _index, resource, obj in timeline:
        perform(router.expire(at))
        if resource == "conditions":
            perform(router.pod_condition(obj, at))
        elif resource == "pods" and failed_condition(obj) is not None:
            # the pod as created; its condition at its own time (a "conditions" entry)
            status = {**(obj.get("status") or {}), "conditions": [
                c for c in (obj.get("status") or {}).get("conditions") or []
                if not (isinstance(c, dict) and c.get("type") == POD_SCHEDULED)]}
            perform(router.route(resource, "ADDED", {**obj, "status": status}, None, at))
        else:
            perform(router.route(resource, "ADDED", obj, None, at))
    perform(router.expire(2**62))
    return out


def trace_lines(path: Path, cluster: str = DEFAULT_CLUSTER) -> Iterator[tuple[int, bytes]]:
    """``(number, raw JSON line)`` of a trace, or of the records of a dump (numbered from 1 in
    event-time order): what every trace-reading command folds. Records without a ``cluster``
    are given ``cluster`` (``producers.clusters``: nothing changes in ``default``); a trace's
    record that names its cluster keeps it. Raises ``DumpError`` or ``OSError``."""
    from streams.wire.traces import read_lines

    doc = read_dump(path)
    if doc is None:
        for number, raw in read_lines(path):
            yield number, line_in_cluster(raw, cluster)
        return
    for number, record in enumerate(records_of_dump(doc).records, start=1):
        yield number, json.dumps(in_cluster(record, cluster), separators=(",", ":")).encode()
