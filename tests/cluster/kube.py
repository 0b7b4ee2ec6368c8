"""Helpers of the cluster tier: polling, the Events of a pod by writer, the scenario report,
and the time until the user sees gangstate's Event (:class:`EventClock`), and the check that the
Events the chain wrote agree with the offline fold of the same records
(:func:`assert_events_agree_with_fold`, run by :func:`record_scenario` for every scenario).

Imported as ``tests.cluster.kube`` by the conftest and the tests alike (one module, one
:data:`REPORT`, one :data:`CLOCK`)."""

from __future__ import annotations

import heapq
import json
import os
import threading
import time
from pathlib import Path
from statistics import quantiles
from typing import Any, Callable, Iterable

import pytest
from kafka import KafkaConsumer, TopicPartition
from kubernetes import client

from streams.core.cluster import DEFAULT_CLUSTER, key_of
from streams.core.decide import SUMMARY_SCHEMA
from streams.core.timefmt import parse_time
from streams.dev.localcluster import Chain, pod_events
from streams.events.recorder import ANNOTATION_LAST_AT, COMPONENT, written_offline
from streams.settings import Settings
from streams.wire.contracts import TICK_SCHEMA
from streams.kafka.partitions import partition_of
from streams.wire.traces import fold_lines
from tests.doubles.apiserver import eventually


def wait_for(what: str, probe: Callable[[], Any], timeout: float, interval: float = 1.0,
             describe: Callable[[], str] = lambda: "") -> Any:
    """Poll ``probe`` (``eventually`` of the test API server) until it returns something
    truthy; fail with ``what`` (and ``describe()``) after ``timeout`` seconds."""
    try:
        return eventually(probe, timeout, interval)
    except AssertionError:
        pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{describe()}")


def gangstate_events(core: client.CoreV1Api, namespace: str, pod: str,
                     uid: str | None = None) -> list[dict[str, Any]]:
    """The Events ``gangstate`` wrote on a pod (of that ``uid`` when given), as ``kubectl
    describe pod`` lists them."""
    return [e for e in pod_events(core, namespace, pod, uid) if e["from"] == "gangstate"]


def scheduler_events(core: client.CoreV1Api, namespace: str, pod: str) -> list[dict[str, Any]]:
    """The Events koord-scheduler wrote on a pod."""
    return [e for e in pod_events(core, namespace, pod) if e["from"] == "koord-scheduler"]


def scheduler_log_matches(cluster: Any, pattern: str) -> set[str]:
    """The first groups of every match of the regular expression ``pattern`` in the scheduler's
    log so far (koord-scheduler logs at ``--v 2``, ``deploy/cluster/controlplane.py``); for
    what the scheduler only logs, e.g. a PreEnqueue refusal (K coscheduling.go:122-128)."""
    import re

    text = cluster.log_path("koord-scheduler").read_text(errors="replace")
    return {m.group(1) if m.groups() else m.group(0) for m in re.finditer(pattern, text)}


#: scenario namespace -> {"scheduler": Counter of reasons, "gangstate": Counter of reasons,
#: "latency": seconds from cause to gangstate's Event, one per gangstate Event first seen}
REPORT: dict[str, dict[str, Any]] = {}


class EventClock:
    """When each Event of the cluster became visible through the API server: a watch of
    core/v1 Events in a daemon thread (the test's own admin client), ``time.time()`` at
    delivery.

    ``seen_events``: ``(namespace, pod, writer, reason, time seen, caused at)``: each
    gangstate Event when first seen, each koord-scheduler Event whenever it is written (created
    or counted up). ``caused at`` (gangstate's Events only, else ``None``) is the event time of
    the diagnostic the Event shows, read from its ``gangstate.dev/last-observed-at``
    annotation (``streams.events.bodies``; a new Event's first and only occurrence): the
    ``observed_at`` the watch producer stamped on the record that caused it when the change
    reached it (the scheduler's Event, the pod's change), or for an output fired by a timer
    its due time (``streams.core.fold.fire_timers``): the end of the grace period of a
    PreEnqueue hold, of a failure episode's settling time, of the stranded wait. The watch
    producer's clock and this one are the same machine's wall clock.
    """

    def __init__(self, core: Any) -> None:
        self.core = core
        self.seen_events: list[tuple[str, str, str, str, float, float | None]] = []
        self._uids: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        """Start the watch; returns once it is listening."""
        self._thread.start()
        time.sleep(1.0)

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        from kubernetes import watch

        lister = self.core.list_event_for_all_namespaces
        version = lister().metadata.resource_version
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                for item in w.stream(lister, resource_version=version, timeout_seconds=30):
                    now = time.time()
                    obj = item["object"]
                    version = obj.metadata.resource_version
                    if item["type"] not in ("ADDED", "MODIFIED"):
                        continue
                    writer = (obj.source.component if obj.source and obj.source.component
                              else obj.reporting_component) or ""
                    new = obj.metadata.uid not in self._uids
                    self._uids.add(obj.metadata.uid)
                    # gangstate's Events: when first seen; the scheduler's: every occurrence
                    # (it counts a repeated Event up on the same object)
                    if writer == "gangstate" and new:
                        caused = (obj.metadata.annotations or {}).get(ANNOTATION_LAST_AT)
                        self.seen_events.append((
                            obj.metadata.namespace, obj.involved_object.name, writer,
                            obj.reason, now, parse_time(caused) / 1e6 if caused else None))
                    elif writer != "gangstate":
                        self.seen_events.append((obj.metadata.namespace,
                                                 obj.involved_object.name, writer, obj.reason,
                                                 now, None))
            except Exception:  # an expired resource version, or the API server restarting
                version = None
                while version is None and not self._stop.is_set():
                    try:
                        version = lister().metadata.resource_version
                    except Exception:  # still down: try again shortly
                        self._stop.wait(0.2)

    def latencies(self, namespace: str) -> list[float]:
        """Seconds from cause to sight for every gangstate Event of ``namespace``'s pods:
        when it was first seen here minus the event time of its cause (``seen_events``)."""
        return [seen - caused for ns, _pod, writer, _reason, seen, caused in self.seen_events
                if ns == namespace and writer == "gangstate" and caused is not None]


#: the session's :class:`EventClock` (started by the conftest), or ``None``
CLOCK: EventClock | None = None


def latency_summary(values: list[float]) -> str:
    """``n, p50, p99, max`` of latencies in seconds, as text."""
    if not values:
        return "none"
    v = sorted(values)
    q = quantiles(v, n=100, method="inclusive") if len(v) > 1 else v * 99
    return f"{len(v)} Events, p50 {q[49]:.2f} s, p99 {q[98]:.2f} s, max {v[-1]:.2f} s"


def report_table() -> str:
    """:data:`REPORT` as a Markdown table (empty when no scenario was recorded)."""
    if not REPORT:
        return ""
    lines = ["| scenario | scheduler's own Events | gangstate's Events on the pods | "
             "cause -> gangstate's Event seen |", "|---|---|---|---|"]

    def fmt(counts: Any) -> str:
        return ", ".join(f"{r} x{n}" for r, n in sorted(counts.items())) or "none"

    for ns, row in sorted(REPORT.items()):
        lines.append(f"| {ns} ({row['pods']} pods) | {fmt(row['scheduler'])} | "
                     f"{fmt(row['gangstate'])} | {latency_summary(row.get('latency', []))} |")
    every = [x for row in REPORT.values() for x in row.get("latency", [])]
    lines.append("")
    lines.append(f"time until the user sees it (from the watch producer seeing the cause: the "
                 f"scheduler's Event, the pod's change, or the end of a grace period, settling "
                 f"time or stranded wait; to gangstate's Event seen through the API server), "
                 f"all scenarios: {latency_summary(every)}")
    return "\n".join(lines)


def record_scenario(core: client.CoreV1Api, namespace: str, chain: Chain | None = None,
                    settings: Settings | None = None) -> None:
    """Count, for the report, the Events each writer left on the pods of ``namespace``; with
    ``chain``, first check that those Events agree with the offline fold of the records the
    watcher published for the namespace (:func:`assert_events_agree_with_fold`). With
    ``$GANGSTATE_RECORD_DIR`` set, also save the namespace's records (:func:`save_recording`;
    ``settings``: the chain's, when no ``chain`` is given)."""
    from collections import Counter

    if chain is not None:
        assert_events_agree_with_fold(core, chain, namespace)
    target = os.environ.get("GANGSTATE_RECORD_DIR")
    if target and (chain is not None or settings is not None):
        save_recording(chain.settings if chain is not None else settings, namespace,
                       Path(target))

    scheduler: Counter[str] = Counter()
    mine: Counter[str] = Counter()
    pods = core.list_namespaced_pod(namespace).items
    for p in pods:
        for e in pod_events(core, namespace, p.metadata.name, p.metadata.uid):
            target = mine if e["from"] == "gangstate" else scheduler
            target[e["reason"]] += e["count"]
    REPORT[namespace] = {"pods": len(pods), "scheduler": scheduler, "gangstate": mine,
                         "latency": CLOCK.latencies(namespace) if CLOCK else []}


def delete_and_record(core: client.CoreV1Api, settings: Settings, namespace: str,
                      names: list[str], timeout: float = 60.0) -> None:
    """End a scenario whose scheduler keeps retrying (an Event storm): delete its pods ``names``
    at once (grace 0), wait until they are gone, and with ``$GANGSTATE_RECORD_DIR`` set save
    the namespace's records again, so that the recording ends with the deletions (a recorded
    case then tells a history that is over, whatever later time it is folded to)."""
    for name in names:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    left = set(names)
    wait_for(f"pods {sorted(left)} of {namespace} gone", lambda: not left & {
        p.metadata.name for p in core.list_namespaced_pod(namespace).items}, timeout)
    target = os.environ.get("GANGSTATE_RECORD_DIR")
    if target:
        # the watcher publishes the deletions within its tick interval; wait for them
        wait_for(f"the deletions of {namespace} in gang-events", lambda: sum(
            1 for _n, raw in namespace_records(settings, namespace)
            if b'"type":"DELETED"' in raw and b'"resource":"pods"' in raw) >= len(names),
            timeout)
        save_recording(settings, namespace, Path(target))


def save_recording(settings: Settings | None, namespace: str, target: Path) -> Path:
    """Write the ``gang-events`` records of ``namespace`` (:func:`namespace_records`: what the
    watcher and the scheduler shim published, in order) to ``target/<namespace>.jsonl``, one
    record per line, as the cases' ``trace.jsonl`` (``tests/cases/recorded/README.md`` says
    how they become cases). Ticks are kept from the namespace's first record on, once per
    ``observed_at`` (the watcher sends one to every partition): they carry the clock up to the
    moment of the recording; the session's earlier ticks say nothing about this namespace.
    Returns the path written."""
    assert settings is not None
    records = [raw for _n, raw in namespace_records(settings, namespace)]
    decoded = [json.loads(raw) for raw in records]
    own = [i for i, rec in enumerate(decoded) if rec.get("schema") != TICK_SCHEMA]
    lines: list[bytes] = []
    seen_ticks: set[str] = set()
    if own:
        for i in range(own[0], len(decoded)):
            rec = decoded[i]
            if rec.get("schema") == TICK_SCHEMA:
                if rec.get("observed_at") in seen_ticks:
                    continue
                seen_ticks.add(rec.get("observed_at"))
            lines.append(records[i])
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"{namespace}.jsonl"
    path.write_bytes(b"".join(line.rstrip(b"\n") + b"\n" for line in lines))
    return path


# ---------------------------------------------------------------------------------------------
# The chain against the offline fold
# ---------------------------------------------------------------------------------------------

ObjectKey = tuple[str, str, str]
"""An involved object: ``(kind, name, uid)``."""
Said = dict[ObjectKey, list[tuple[str, str, str]]]
"""Per involved object, the sorted ``(type, reason, latest message)`` of each Event on it."""


def namespace_records(settings: Settings, namespace: str,
                      cluster: str = DEFAULT_CLUSTER) -> list[tuple[int, bytes]]:
    """The ``gang-events`` records of the gangs of ``namespace`` (key ``<namespace>/...``:
    Pod, PodGroup and cycle records; acks keyed by a gang group of it) and every tick, read
    from the beginning up to the end offsets at the time of the call, as numbered raw lines for
    ``fold_lines``. The ``gangstate.gang-summary/v1`` records the worker sent back into the
    topic are left out: the offline fold makes its own (loopback). Partitions are merged by
    the records' Kafka timestamps; each partition's order, hence each gang's, is kept. With
    ``cluster``, the namespace of that cluster of a fleet (keys ``<cluster>:<namespace>/...``,
    ``streams.core.cluster.key_of``)."""
    assert settings.bootstrap
    topic = settings.topics.gang_events
    prefix = key_of(cluster, namespace + "/").encode()
    consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap, enable_auto_commit=False,
                             group_id=None, consumer_timeout_ms=2000)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        per_partition: dict[int, list[tuple[int, int, bytes]]] = {tp.partition: [] for tp in tps}
        left = {tp for tp in tps if end[tp] > 0}
        while left:
            batch = consumer.poll(timeout_ms=2000, max_records=5000)
            if not batch:
                break
            for tp, messages in batch.items():
                for m in messages:
                    if m.offset >= end[tp]:
                        left.discard(tp)
                        break
                    if m.key is None or m.key.startswith(prefix):
                        per_partition[tp.partition].append((m.timestamp, m.offset, m.value))
                    if m.offset + 1 >= end[tp]:
                        left.discard(tp)
    finally:
        consumer.close()
    merged = heapq.merge(*per_partition.values(), key=lambda r: r[0])
    lines = [value for _ts, _off, value in merged
             if json.loads(value).get("schema") != SUMMARY_SCHEMA]
    return list(enumerate(lines, start=1))


def fold_said(diagnostics: Iterable[dict[str, Any]]) -> Said:
    """What the sink writes for these diagnostics, worked out offline
    (``streams.events.recorder.written_offline``); returns, per involved object, the
    ``(type, reason, message)`` each of its Events ends with."""
    said: Said = {}
    for key, state in written_offline(diagnostics).items():
        ref = key.involved
        said.setdefault((ref.kind, ref.name, ref.uid), []).append(
            (key.type, key.reason, state.message))
    return {obj: sorted(rows) for obj, rows in said.items()}


def events_said(core: client.CoreV1Api, namespace: str) -> Said:
    """The Events gangstate wrote in ``namespace`` (core/v1 view, as ``kubectl get events``
    lists them), per involved object: sorted ``(type, reason, message)``."""
    said: Said = {}
    for ev in core.list_namespaced_event(namespace).items:
        source = ev.source.component if ev.source and ev.source.component \
            else ev.reporting_component
        if source != COMPONENT:
            continue
        ref = ev.involved_object
        said.setdefault((ref.kind, ref.name, ref.uid or ""), []).append(
            (ev.type, ev.reason, ev.message))
    return {obj: sorted(rows) for obj, rows in said.items()}


def fold_of_namespace(settings: Settings, namespace: str,
                      cluster: str = DEFAULT_CLUSTER) -> Said:
    """Fold the namespace's records offline (``fold_lines``, no final tick: the ticks read
    back carry the clock) and say what the sink of ``cluster`` would have written for its
    gangs."""
    result = fold_lines(namespace_records(settings, namespace, cluster), None, settings.fold,
                        partition_of=partition_of)
    assert not result.errors, result.errors[:3]
    return fold_said(d for d in result.diagnostics
                     if d["gang"].startswith(namespace + "/")
                     and d.get("cluster", DEFAULT_CLUSTER) == cluster)


def assert_events_agree_with_fold(core: client.CoreV1Api, chain: Chain, namespace: str,
                                  timeout: float = 45.0) -> Said:
    """Wait until the Events gangstate wrote on the objects of ``namespace`` (per Pod uid and
    PodGroup: each Event's type, reason and latest message) are exactly what the offline fold
    of the records the watcher published for that namespace (of the chain's cluster, in a
    fleet) says the sink writes; fail with
    the difference after ``timeout`` seconds. Returns the agreed Events."""
    last: dict[str, Said] = {}

    def agree() -> Said | None:
        offline = fold_of_namespace(chain.settings, namespace, chain.cluster_id)
        live = events_said(core, namespace)
        last.update(offline=offline, live=live)
        return live if offline == live and live else None

    def difference() -> str:
        offline, live = last.get("offline", {}), last.get("live", {})
        lines = [f"Events in {namespace} vs the offline fold of its gang-events records:"]
        for obj in sorted(set(offline) | set(live)):
            if offline.get(obj) != live.get(obj):
                lines.append(f"  {obj}\n    fold:   {offline.get(obj)}\n    Events: "
                             f"{live.get(obj)}")
        return "\n".join(lines)

    return wait_for(f"gangstate's Events in {namespace} to agree with the offline fold",
                    agree, timeout, interval=2.0, describe=difference)
