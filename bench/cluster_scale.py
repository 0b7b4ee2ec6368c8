"""The whole chain at cluster scale: a trace-shaped gang workload on many KWOK nodes, without and
with gangstate (issue 25 items 1-3).

Usage::

    python bench/cluster_scale.py [--nodes 1000] [--gpus-per-node 8] [--window 240]
                                  [--compress 500] [--seed 4] [--plan FILE] [--quick] [--json-only]

One local control plane (``deploy/cluster/controlplane.py``: etcd, kube-apiserver,
kube-controller-manager, KWOK as the nodes' kubelet, koord-scheduler v1.8.0) with ``--nodes``
fake nodes of ``--gpus-per-node`` ``nvidia.com/gpu`` (64 cpu, 512Gi, 110 pods each), one local
Kafka, and the plan of ``bench/workload.py`` (Alibaba cluster-trace-gpu-v2023; ``--plan`` replays
a saved one) replayed twice, each time over ``--window`` seconds of wall clock in namespaces of
its own: each job's pods are created at its arrival and deleted (grace 0) at the end of its
duration; KWOK runs them.

1. **without gangstate** (``base``): Koordinator's own koord-scheduler, no chain, no broker load;
2. **with gangstate** (``gs``): gangstate's whole chain (``gangstate watch`` -> Kafka -> ``worker``
   -> ``sink``; grace 10 s, stranded wait 30 s, holds on) and the shim build of koord-scheduler
   publishing its round records and applying holds; after the window, the watcher is restarted
   and its relist timed, then again once ``--relist-pods`` more pods of 1 GPU are bound (a
   full cluster's pod count).

Measured in each window (a watch of every core/v1 Event, ``/proc``, the API server's and the
components' ``/metrics``):

- ``cause -> gangstate Event``: seconds from the cause (the Event's
  ``gangstate.dev/last-observed-at`` annotation: the watch producer's stamp of the causing record
  or a timer's due time) to the Event first seen by this watch; p50/p99/max, all and per reason,
  and for the reasons a record causes (:data:`TIMER_REASONS` are the others);
- scheduler Event lag: seen minus ``eventTime`` (a series' update: minus its
  ``lastObservedTime``), koord-scheduler's Events; gangstate's beside it;
- Events a minute, each writer (occurrences: a new Event, or its count or series count going
  up), and their ratio (gangstate / scheduler: the noise ratio);
- the watcher's records published a second (``gangstate_watch_records_published_total``);
- the worker group's Kafka lag on gang-events (end offsets minus committed, sampled every 5 s);
- CPU seconds a minute (``/proc/<pid>/stat`` utime + stime) and peak RSS (``VmRSS`` sampled every
  2 s; ``VmHWM`` at the end) of each component;
- API server write requests (``apiserver_request_total`` verbs POST, PUT, PATCH, DELETE, APPLY,
  every client) and the sink's writes (``gangstate_sink_events_total`` created + patched) and
  its share of them.

**Prefill** (``--occupancy F``, default :data:`bench.workload.OCCUPANCY` 0.8, assumed: the
trace's own instants hold 0.64 % of its GPUs, see ``bench/workload.py``): before the first window,
gangs drawn from the trace's GPUs per task (:func:`bench.workload.prefill_gangs`; a task of G GPUs
one gang of G members of 1 GPU, as the plan runs a job) are created in namespace ``prefill`` until
F of the cluster's GPUs are asked for, and waited on until bound; they run through both windows
(the same for both) and are deleted at the end. After the chain's start, the bench waits until the
sink's writes are quiet (its Events on the prefill's pods) before the second window. With a
prefill the watcher's relist is timed at the prefill's pod count, and ``--relist-pods`` defaults
to 0.

Prints the table and one JSON line (``{"bench": "cluster-scale", ...}``). ``--quick``: 100 nodes,
a 60 s window, ten times ``--compress`` (the same arrival rate; a smoke run of about 3
minutes). Figures in docs/benchmarks.md, "Cluster scale". A run with the defaults took 21 min 8 s on
2 cores here (231 s of it starting 1,000 nodes, 263 s binding the prefill's 6,400 pods;
``bench/profiles/cluster-scale-run-3.txt``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.workload import (OCCUPANCY, Job, Shares, make_plan, prefill_gangs,  # noqa: E402
                            read_plan, summary, write_plan)

WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE", "APPLY")
GROUPS = "gang.scheduling.koordinator.sh/groups"
#: reasons whose cause is a timer's due time (grace period of a PreEnqueue hold, the stranded
#: wait, the settling after a loss, a Permit wait), not a record (docs/benchmarks.md, "Time
#: until the user sees it"; docs/contracts.md)
TIMER_REASONS = frozenset({"GangMembersInsufficient", "GangNotInitialized", "GangGroupIncomplete",
                           "GangMemberGated", "GangMembersStranded", "GangMembersLost",
                           "GangPermitTimeout"})
CLUSTER_COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "koord-scheduler",
                      "kwok")
CHAIN_COMPONENTS = ("watch", "worker", "sink")
#: the namespace of the prefill's long-running pods (:meth:`Runner.prefill`)
PREFILL_NS = "prefill"


# -- pure counting and summaries -------------------------------------------------------------


def quantile_summary(values: Sequence[float]) -> dict[str, Any]:
    """``{"n", "p50", "p99", "max"}`` of ``values`` (seconds, rounded to ms; nearest-rank
    quantiles: the smallest value with at least that share at or below it); ``None`` figures
    when empty."""
    v = sorted(values)
    if not v:
        return {"n": 0, "p50": None, "p99": None, "max": None}

    def rank(q: float) -> float:  # the ceil(q * n)-th smallest
        return v[max(0, math.ceil(round(q * len(v), 9)) - 1)]

    return {"n": len(v), "p50": round(rank(0.50), 3), "p99": round(rank(0.99), 3),
            "max": round(v[-1], 3)}


def metric_sum(text: str, name: str, match: Mapping[str, Iterable[str]] | None = None) -> float:
    """Sum of the samples named ``name`` in Prometheus text ``text`` whose labels take one of
    the values of ``match`` (``{label: values}``; every sample when ``None``)."""
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) in set(vs)
                                      for k, vs in (match or {}).items()):
                total += s.value
    return total


def occurrences(seen: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """Occurrences per (writer, reason) from the watched Event sightings (dicts with ``uid``,
    ``writer``, ``reason``, ``count``: the Event's count, or its series count, 1 when unset):
    each Event counts its highest count seen."""
    best: dict[str, tuple[str, str, int]] = {}
    for s in seen:
        prev = best.get(s["uid"])
        n = int(s.get("count") or 1)
        if prev is None or n > prev[2]:
            best[s["uid"]] = (s["writer"], s["reason"], n)
    out: dict[tuple[str, str], int] = defaultdict(int)
    for writer, reason, n in best.values():
        out[(writer, reason)] += n
    return dict(out)


def lag_trend(samples: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """Kafka lag samples ``(seconds, records)``: the max, the mean, the last, and whether it
    grew: the mean of the last third above twice the mean of the first third plus 100 records
    (a lag that only breathes with the commit interval does not count)."""
    if not samples:
        return {"samples": 0, "max": None, "mean": None, "last": None, "growing": None}
    lags = [lag for _, lag in samples]
    third = max(1, len(lags) // 3)
    first, last = statistics.fmean(lags[:third]), statistics.fmean(lags[-third:])
    return {"samples": len(lags), "max": max(lags), "mean": round(statistics.fmean(lags), 1),
            "last": lags[-1], "growing": last > 2 * first + 100}


def per_minute(count: float, seconds: float) -> float:
    """``count`` over ``seconds`` as a rate a minute (1 decimal)."""
    return round(count * 60.0 / seconds, 1) if seconds > 0 else 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (``/proc/<pid>/stat`` fields 14-15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kib(pid: int, field: str) -> int:
    """``field`` (``VmRSS``, ``VmHWM``) of ``/proc/<pid>/status``, KiB; 0 when absent."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def actions(jobs: Sequence[Job]) -> list[tuple[float, str, Job]]:
    """The replay's calls, in time order: ``(seconds, "create" | "peer" | "delete", job)``."""
    out = []
    for j in jobs:
        out.append((j.arrival_s, "create", j))
        if j.kind == "stranded":
            out.append((j.arrival_s + j.peer_delay_s, "peer", j))
        out.append((j.arrival_s + j.duration_s, "delete", j))
    order = {"create": 0, "peer": 1, "delete": 2}
    out.sort(key=lambda a: (a[0], order[a[1]], a[2].gang))
    return out


def pod_names(job: Job) -> list[str]:
    """The pods of ``job`` (members ``<gang>-<i>``; a stranded job's peer ``<gang>-peer-0``)."""
    names = [f"{job.gang}-{i}" for i in range(job.members)]
    if job.kind == "stranded":
        names.append(f"{job.gang}-peer-0")
    return names


def explained_events(seen: Iterable[Mapping[str, Any]],
                     leave_out: frozenset[str] = frozenset({"GangScheduled"})) -> list[dict[str, Any]]:
    """gangstate's Events other than ``leave_out``, one entry per Event (its last sighting):
    ``ns``, ``pod`` (involved object), ``reason``, ``count``, ``message``; sorted by namespace,
    pod, reason."""
    last: dict[str, Mapping[str, Any]] = {}
    for s in seen:
        if s["writer"] == "gangstate" and s["reason"] not in leave_out:
            last[s["uid"]] = s
    return sorted(({"ns": s["ns"], "pod": s.get("pod", ""), "reason": s["reason"],
                    "count": int(s.get("count") or 1), "message": s.get("message", "")}
                   for s in last.values()), key=lambda e: (e["ns"], e["pod"], e["reason"]))


def pod_writers(seen: Iterable[Mapping[str, Any]],
                pods: Iterable[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """For each ``(namespace, pod)`` of ``pods``: occurrences by ``writer/reason`` of the Events
    on it (:func:`occurrences`), keyed ``namespace/pod``: what the scheduler wrote beside
    gangstate's explanations."""
    wanted = set(pods)
    by_pod: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for s in seen:
        key = (s["ns"], s.get("pod", ""))
        if key in wanted:
            by_pod[key].append(s)
    return {f"{ns}/{pod}": {f"{w}/{r}": n for (w, r), n in sorted(occurrences(xs).items())}
            for (ns, pod), xs in sorted(by_pod.items())}


def phase_figures(phase: Mapping[str, Any]) -> dict[str, Any]:
    """The derived figures of one phase's raw measurements (pure; see :func:`Runner.window`)."""
    secs = phase["window_s"]
    seen = phase["events"]
    occ = occurrences(seen)
    mine = sum(n for (w, _), n in occ.items() if w == "gangstate")
    theirs = sum(n for (w, _), n in occ.items() if w == "koord-scheduler")
    lat = [s["seen"] - s["caused"] for s in seen
           if s["writer"] == "gangstate" and s.get("caused") is not None and s.get("first")]
    by_reason: dict[str, list[float]] = defaultdict(list)
    for s in seen:
        if s["writer"] == "gangstate" and s.get("caused") is not None and s.get("first"):
            by_reason[s["reason"]].append(s["seen"] - s["caused"])
    record_caused = [x for r, xs in by_reason.items() if r not in TIMER_REASONS for x in xs]
    sched_lag = [s["seen"] - s["stamped"] for s in seen
                 if s["writer"] == "koord-scheduler" and s.get("stamped") is not None]
    gs_lag = [s["seen"] - s["stamped"] for s in seen
              if s["writer"] == "gangstate" and s.get("stamped") is not None]
    cpu = {c: round((v[1] - v[0]) * 60.0 / secs, 2) for c, v in phase["cpu"].items()}
    writes = phase["api_writes"][1] - phase["api_writes"][0]
    out: dict[str, Any] = {
        "window_s": round(secs, 1),
        "cause_to_event_s": quantile_summary(lat),
        "cause_to_event_record_caused_s": quantile_summary(record_caused),
        "cause_to_event_by_reason_s": {r: quantile_summary(xs)
                                       for r, xs in sorted(by_reason.items())},
        "scheduler_event_lag_s": quantile_summary(sched_lag),
        "gangstate_event_lag_s": quantile_summary(gs_lag),
        "scheduler_events_per_min": per_minute(theirs, secs),
        "gangstate_events_per_min": per_minute(mine, secs),
        "noise_ratio": round(mine / theirs, 4) if theirs else None,
        "events_by_reason": {f"{w}/{r}": n for (w, r), n in sorted(occ.items())},
        "gangstate_explained_events": explained_events(seen),
        "explained_pods": pod_writers(seen, {(e["ns"], e["pod"])
                                             for e in explained_events(seen)}),
        "cpu_s_per_min": cpu, "peak_rss_mib": phase["peak_rss_mib"],
        "hwm_mib": phase["hwm_mib"],
        "api_writes_per_min": per_minute(writes, secs),
        "replay_late_s_max": phase["late_max"],
        "pods_created": phase["pods_created"],
    }
    if "sink_writes" in phase:
        sw = phase["sink_writes"][1] - phase["sink_writes"][0]
        out["sink_writes_per_min"] = per_minute(sw, secs)
        out["sink_share_of_api_writes"] = round(sw / writes, 4) if writes else None
    if "published" in phase:
        out["watch_records_per_s"] = round((phase["published"][1] - phase["published"][0])
                                           / secs, 1)
        out["watch_records_per_s_peak"] = phase.get("published_peak")
    if "lag" in phase:
        out["kafka_lag"] = lag_trend(phase["lag"])
        out["kafka_lag_samples"] = [[round(t - phase["lag"][0][0], 1), v]
                                    for t, v in phase["lag"]]
        if phase.get("lag_errors"):
            out["kafka_lag_errors"] = phase["lag_errors"]
    return out


def table(result: Mapping[str, Any]) -> str:
    """The measured table: one row per figure, a column per phase."""
    base, gs = result["phases"].get("base", {}), result["phases"].get("gs", {})

    def q(d: Mapping[str, Any] | None) -> str:
        if not d or not d.get("n"):
            return "-"
        return f"{d['p50']} / {d['p99']} / {d['max']} (n {d['n']})"

    def g(d: Mapping[str, Any], *keys: str) -> Any:
        for k in keys:
            if not isinstance(d, Mapping):
                return "-"
            d = d.get(k, "-")
        return "-" if d is None else d

    pre = result.get("prefill")
    rows = []
    if pre:
        share = pre["gpus"] / (result["nodes"] * result["gpus_per_node"])
        rows.append(("prefill before both windows: gangs / pods / GPUs (share); create / all "
                     "bound, s", f"{pre['gangs']} / {pre['pods']} / {pre['gpus']} "
                     f"({share:.3f}); {pre['create_s']} / {pre['bound_s']}",
                     f"the same; chain settled in {g(result, 'settle', 'settle_s')} s "
                     f"({g(result, 'settle', 'sink_writes')} sink writes)"))
    rows += [
        ("cause -> gangstate Event, s: p50 / p99 / max", "-",
         q(gs.get("cause_to_event_s"))),
        ("  reasons a record causes", "-", q(gs.get("cause_to_event_record_caused_s"))),
    ]
    for reason, d in (gs.get("cause_to_event_by_reason_s") or {}).items():
        rows.append((f"  {reason}{' (timer)' if reason in TIMER_REASONS else ''}", "-", q(d)))
    rows += [
        ("scheduler Event lag (seen - eventTime), s", q(base.get("scheduler_event_lag_s")),
         q(gs.get("scheduler_event_lag_s"))),
        ("gangstate Event lag (seen - firstTimestamp: whole seconds), s", "-", q(gs.get("gangstate_event_lag_s"))),
        ("scheduler Events a minute", g(base, "scheduler_events_per_min"),
         g(gs, "scheduler_events_per_min")),
        ("gangstate Events a minute", "-", g(gs, "gangstate_events_per_min")),
        ("noise ratio (gangstate / scheduler Events)", "-", g(gs, "noise_ratio")),
        ("watcher records published a second (mean / peak 5 s)", "-",
         f"{g(gs, 'watch_records_per_s')} / {g(gs, 'watch_records_per_s_peak')}"),
        ("watcher relist after restart, s: first record / all pods / all nodes", "-",
         f"{g(result, 'relist', 'first_record_s')} / {g(result, 'relist', 'pods_s')} "
         f"({g(result, 'relist', 'pods')} pods) / {g(result, 'relist', 'nodes_s')} "
         f"({g(result, 'relist', 'nodes')} nodes)"),
        ("  the same with the fill's pods added, s: first record / all pods", "-",
         f"{g(result, 'relist_full', 'first_record_s')} / {g(result, 'relist_full', 'pods_s')} "
         f"({g(result, 'relist_full', 'pods')} pods)"),
        ("Kafka lag of the worker group, records (mean / max / last; growing)", "-",
         f"{g(gs, 'kafka_lag', 'mean')} / {g(gs, 'kafka_lag', 'max')} / "
         f"{g(gs, 'kafka_lag', 'last')}; {g(gs, 'kafka_lag', 'growing')}"),
        ("API server write requests a minute", g(base, "api_writes_per_min"),
         g(gs, "api_writes_per_min")),
        ("sink writes a minute (share of API writes)", "-",
         f"{g(gs, 'sink_writes_per_min')} ({g(gs, 'sink_share_of_api_writes')})"),
    ]
    comps = list(CLUSTER_COMPONENTS) + ["broker"] + list(CHAIN_COMPONENTS)
    for c in comps:
        rows.append((f"{c}: CPU s a minute / peak RSS MiB",
                     f"{g(base, 'cpu_s_per_min', c)} / {g(base, 'peak_rss_mib', c)}",
                     f"{g(gs, 'cpu_s_per_min', c)} / {g(gs, 'peak_rss_mib', c)}"))
    rows.append(("pods created in the window (late calls: max s)",
                 f"{g(base, 'pods_created')} ({g(base, 'replay_late_s_max')})",
                 f"{g(gs, 'pods_created')} ({g(gs, 'replay_late_s_max')})"))
    lines = ["| figure | without gangstate | with gangstate |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


# -- the shell: cluster, chain, replay, samplers ------------------------------------------------


class EventWatch:
    """Every core/v1 Event of the cluster as this process's watch sees it, in a daemon thread:
    one sighting per ADDED/MODIFIED (``uid``, ``ns``, ``writer``, ``reason``, ``count``, ``pod``
    (the involved object's name), ``message``, ``seen``
    (``time.time()``), ``first`` (its first sighting), ``caused`` (gangstate's annotation, Unix
    s), ``stamped`` (Unix s of ``eventTime`` on a new Event, of the series' ``lastObservedTime``
    on a series update, else ``None``))."""

    def __init__(self, core: Any) -> None:
        self.core = core
        self.seen: list[dict[str, Any]] = []
        self._uids: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        """Start watching from now."""
        self._version = self.core.list_event_for_all_namespaces(limit=1).metadata.resource_version
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def of(self, prefix: str) -> list[dict[str, Any]]:
        """Sightings of Events in namespaces starting with ``prefix``."""
        with self._lock:
            return [s for s in self.seen if s["ns"].startswith(prefix)]

    def _run(self) -> None:
        from kubernetes import watch

        from streams.core.timefmt import parse_time
        from streams.events.recorder import ANNOTATION_LAST_AT

        version = self._version
        while not self._stop.is_set():
            try:
                for item in watch.Watch().stream(self.core.list_event_for_all_namespaces,
                                                 resource_version=version, timeout_seconds=30):
                    now = time.time()
                    obj = item["object"]
                    version = obj.metadata.resource_version
                    if item["type"] not in ("ADDED", "MODIFIED"):
                        continue
                    writer = (obj.source.component if obj.source and obj.source.component
                              else obj.reporting_component) or ""
                    uid = obj.metadata.uid
                    first = uid not in self._uids
                    self._uids.add(uid)
                    series = obj.series
                    count = (series.count if series and series.count else obj.count) or 1
                    stamped = None
                    if series and series.last_observed_time and not first:
                        stamped = series.last_observed_time.timestamp()
                    elif first:
                        at = obj.event_time or obj.first_timestamp
                        stamped = at.timestamp() if at else None
                    caused = (obj.metadata.annotations or {}).get(ANNOTATION_LAST_AT)
                    with self._lock:
                        self.seen.append({
                            "uid": uid, "ns": obj.metadata.namespace or "", "writer": writer,
                            "reason": obj.reason or "", "count": count, "seen": now,
                            "pod": obj.involved_object.name if obj.involved_object else "",
                            "message": obj.message or "",
                            "first": first, "stamped": stamped,
                            "caused": parse_time(caused) / 1e6 if caused else None})
            except Exception:  # an expired version: go on from now
                try:
                    version = self.core.list_event_for_all_namespaces(
                        limit=1).metadata.resource_version
                except Exception:
                    self._stop.wait(0.5)


class Sampler:
    """Every ``every`` seconds in a daemon thread: the peak ``VmRSS`` of each process of
    ``pids()`` (``{component: pid}``) and, with ``extra``, its result appended to
    ``self.extra`` as ``(time.time(), value)``."""

    def __init__(self, pids: Callable[[], Mapping[str, int | None]], every: float = 2.0,
                 extra: Callable[[], float] | None = None, extra_every: float = 5.0) -> None:
        self.pids, self.every = pids, every
        self.peak: dict[str, int] = {}
        self.extra_fn, self.extra_every = extra, extra_every
        self.extra: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Sampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        next_extra = time.monotonic()
        while not self._stop.is_set():
            for c, pid in self.pids().items():
                if pid:
                    try:
                        self.peak[c] = max(self.peak.get(c, 0), status_kib(pid, "VmRSS"))
                    except OSError:
                        pass
            if self.extra_fn and time.monotonic() >= next_extra:
                next_extra += self.extra_every
                try:
                    self.extra.append((time.time(), self.extra_fn()))
                except Exception as err:  # a sample missed: the next one counts
                    self.errors.append(f"{type(err).__name__}: {err}")
            self._stop.wait(self.every)


def http_text(url: str, timeout: float = 5.0) -> str:
    """``GET url`` (plain HTTP on loopback), as text."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return str(resp.read().decode())


class Runner:
    """One run: the cluster, the broker, the plan; :meth:`window` replays it and measures."""

    def __init__(self, cluster: Any, broker: Any, bootstrap: str, jobs: list[Job],
                 logdir: Path, say: Callable[[str], None]) -> None:
        from kubernetes import client

        self.cluster, self.broker, self.bootstrap = cluster, broker, bootstrap
        self.jobs, self.logdir, self.say = jobs, logdir, say
        self.core = client.CoreV1Api(cluster.api_client())
        self.events = EventWatch(self.core)
        self.chain: Any = None
        self.sink_port = 0
        self._lag_consumer: Any = None

    # -- components --

    def pids(self) -> dict[str, int | None]:
        """``{component: pid}`` of everything running."""
        out: dict[str, int | None] = {c: self.cluster.pid(c) for c in CLUSTER_COMPONENTS}
        if self.broker is not None:
            out["broker"] = self.broker.pid
        if self.chain is not None:
            for c in CHAIN_COMPONENTS:
                proc = self.chain.procs.get(c)
                out[c] = proc.pid if proc is not None and proc.poll() is None else None
        return out

    def start_chain(self) -> None:
        """Gangstate's chain (holds on) on topics of its own, and the shim onto them."""
        from streams.core.fold import FoldSettings
        from streams.dev.localcluster import Chain, controlplane_module
        from streams.kafka.publishing import ensure_topics
        from streams.settings import Settings, Topics

        run = uuid.uuid4().hex[:8]
        settings = Settings(bootstrap=self.bootstrap, topics=Topics(f"bench-scale-{run}."),
                            partitions=4, app_id=f"gangstate-bench-scale-{run}",
                            fold=FoldSettings(grace_seconds=10.0, stranded_seconds=30.0,
                                              holds=True))
        ensure_topics(settings)
        (self.sink_port,) = controlplane_module().free_ports(1)
        sink_port = self.sink_port

        class ScaleChain(Chain):  # the sink with its /metrics port, for its write counts
            def _args(self, name: str) -> list[str]:
                args = super()._args(name)
                return args + ["--http-port", str(sink_port)] if name == "sink" else args

        self.chain = ScaleChain(self.cluster, settings, self.logdir / f"chain-{run}")
        self.chain.start(ready_timeout=300)
        self.cluster.use_shim({"KAFKA_BOOTSTRAP_SERVERS": settings.bootstrap,
                               **settings.security.env(),
                               "GANGSTATE_TOPIC_PREFIX": settings.topics.prefix,
                               "GANGSTATE_SHIM_ID": f"bench-shim-{run}"}, timeout=180)

    def watch_metrics(self) -> str:
        return http_text(f"http://127.0.0.1:{self.chain.watch_port}/metrics")

    def published(self, resources: Iterable[str] | None = None) -> float:
        """The watcher's records published so far (of ``resources``, else all)."""
        match = None if resources is None else {"resource": list(resources)}
        return metric_sum(self.watch_metrics(), "gangstate_watch_records_published_total", match)

    def sink_writes(self) -> float:
        """The sink's Event writes so far (created + patched)."""
        text = http_text(f"http://127.0.0.1:{self.sink_port}/metrics")
        return metric_sum(text, "gangstate_sink_events_total",
                          {"action": ["created", "patched"]})

    def kafka_lag(self) -> float:
        """End offsets of gang-events minus the worker group's committed offsets (an OffsetFetch
        for the group: this consumer never joins it)."""
        from kafka import KafkaConsumer, TopicPartition

        settings = self.chain.settings
        topic = settings.topics.gang_events
        if self._lag_consumer is None:
            self._lag_consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap,
                                               group_id=settings.app_id, client_id="bench-lag",
                                               enable_auto_commit=False)
        consumer = self._lag_consumer
        parts = [TopicPartition(topic, p)
                 for p in sorted(consumer.partitions_for_topic(topic) or ())]
        ends = consumer.end_offsets(parts)
        return float(sum(ends[tp] - (consumer.committed(tp) or 0) for tp in parts))

    def api_writes(self) -> float:
        return metric_sum(self.cluster.get("/metrics"), "apiserver_request_total",
                          {"verb": WRITE_VERBS})

    # -- the replay --

    def pod(self, ns: str, name: str, job: Job, peer: bool = False) -> dict[str, Any]:
        from streams.dev.localcluster import gang_pod

        if peer:
            return gang_pod(ns, name, gang=f"{job.gang}-peer", min_available=1, gpu=1)
        ann = {GROUPS: json.dumps([f"{ns}/{job.gang}-peer"])} if job.groups else None
        return gang_pod(ns, name, gang=job.gang, min_available=job.min_available,
                        gpu=job.gpus_per_member, annotations=ann,
                        gates=("gangstate.dev/bench-gate",) if job.gated else ())

    def call(self, kind: str, job: Job, prefix: str) -> int:
        """One replay step; returns the pods created."""
        from kubernetes.client.exceptions import ApiException

        ns = f"{prefix}-{job.namespace}"
        names = pod_names(job)
        try:
            if kind == "create":
                for name in names[:job.members]:
                    self.core.create_namespaced_pod(ns, self.pod(ns, name, job))
                return job.members
            if kind == "peer":
                self.core.create_namespaced_pod(ns, self.pod(ns, names[-1], job, peer=True))
                return 1
            for name in names:
                try:
                    self.core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
                except ApiException as err:
                    if err.status != 404:
                        raise
        except ApiException as err:
            self.say(f"replay: {kind} {ns}/{job.gang}: {err.status} {err.reason}")
        return 0

    def replay(self, prefix: str, window: float) -> tuple[int, float]:
        """Replay the plan's calls at their times from now (4 threads); returns the pods created
        and the latest call's lateness (s)."""
        # deletions due at the window's end (jobs cut there) are left to :meth:`clean`, so the
        # relist after the window sees the cluster as it was
        steps = [a for a in actions(self.jobs)
                 if a[0] < window - 1e-3 or (a[1] != "delete" and a[0] <= window)]
        start = time.monotonic()
        late, created = 0.0, 0
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            futures = []
            for at, kind, job in steps:
                wait = start + at - time.monotonic()
                if wait > 0:
                    time.sleep(wait)  # the plan's clock: the call is due then
                late = max(late, time.monotonic() - start - at)
                futures.append(pool.submit(self.call, kind, job, prefix))
            created = sum(f.result() for f in futures)
        rest = start + window - time.monotonic()
        if rest > 0:
            time.sleep(rest)  # the window's end
        return created, round(late, 3)

    def window(self, prefix: str, window: float, chain: bool) -> dict[str, Any]:
        """Replay the plan in namespaces ``<prefix>-team-*`` and measure (raw figures)."""
        from streams.dev.localcluster import create_namespace

        for ns in sorted({j.namespace for j in self.jobs}):
            create_namespace(self.core, f"{prefix}-{ns}")
        pids = {c: p for c, p in self.pids().items() if p}
        sampler = Sampler(self.pids, extra=self.kafka_lag if chain else None).start()
        c0 = {c: cpu_seconds(p) for c, p in pids.items()}
        w0 = self.api_writes()
        raw: dict[str, Any] = {}
        peak_pub: list[float] = []
        if chain:
            raw["sink_writes"] = [self.sink_writes()]
            raw["published"] = [self.published()]
            stop = threading.Event()

            def rate() -> None:
                last, at = raw["published"][0], time.monotonic()
                while not stop.wait(5.0):
                    try:
                        now_v, now = self.published(), time.monotonic()
                    except OSError:
                        continue
                    peak_pub.append((now_v - last) / (now - at))
                    last, at = now_v, now

            rater = threading.Thread(target=rate, daemon=True)
            rater.start()
        t0 = time.monotonic()
        created, late = self.replay(prefix, window)
        secs = time.monotonic() - t0
        c1 = {c: cpu_seconds(p) for c, p in pids.items() if self.pids().get(c) == p}
        w1 = self.api_writes()
        if chain:
            stop.set()
            raw["sink_writes"].append(self.sink_writes())
            raw["published"].append(self.published())
            raw["published_peak"] = round(max(peak_pub), 1) if peak_pub else None
        sampler.stop()
        if chain:
            raw["lag"] = [(t, v) for t, v in sampler.extra]
            raw["lag_errors"] = sampler.errors[:3]
        raw.update({
            "window_s": secs, "cpu": {c: (c0[c], c1[c]) for c in c1},
            "api_writes": (w0, w1), "late_max": late, "pods_created": created,
            "peak_rss_mib": {c: round(v / 1024, 1) for c, v in sampler.peak.items()},
            "hwm_mib": {c: round(status_kib(p, "VmHWM") / 1024, 1) for c, p in pids.items()
                        if self.pids().get(c) == p}})
        return raw

    def relist(self) -> dict[str, Any]:
        """Restart the watcher; seconds until it published its first record, and until it
        republished every pod of koord-scheduler (``resource="pods"`` records >= the pods) and
        every node (``resource="nodes"`` records >= the nodes)."""
        pods = len(self.core.list_pod_for_all_namespaces(
            field_selector="spec.schedulerName=koord-scheduler").items)
        nodes = len(self.core.list_node().items)
        watches_nodes = self.published(["nodes"]) > 0
        start = time.monotonic()
        self.chain.restart("watch")
        first = all_pods = all_nodes = None
        if not watches_nodes:  # the watcher publishes no node records: only its pods count
            all_nodes = -1.0
        deadline = start + 300
        while time.monotonic() < deadline and (all_pods is None or all_nodes is None):
            try:
                text = self.watch_metrics()
            except OSError:
                time.sleep(0.1)
                continue
            total = metric_sum(text, "gangstate_watch_records_published_total")
            if first is None and total > 0:
                first = round(time.monotonic() - start, 2)
            now = round(time.monotonic() - start, 2)
            if all_pods is None and metric_sum(text, "gangstate_watch_records_published_total",
                                               {"resource": ["pods"]}) >= pods:
                all_pods = now
            if all_nodes is None and metric_sum(text, "gangstate_watch_records_published_total",
                                                {"resource": ["nodes"]}) >= nodes:
                all_nodes = now
            time.sleep(0.1)
        return {"pods": pods, "nodes": nodes, "first_record_s": first, "pods_s": all_pods,
                "nodes_s": all_nodes if watches_nodes else None}

    def prefill(self, gangs: Sequence[int], timeout: float = 900.0) -> dict[str, Any]:
        """Fill the cluster before the windows: for each ``g`` of ``gangs`` (:func:`prefill_gangs`)
        one gang ``prefill-<i>`` of ``g`` members of 1 GPU in namespace ``prefill`` (8 threads),
        then wait until every member is bound (``timeout`` seconds at most). They run through both
        windows. Returns the gangs, pods, GPUs, the seconds to create them and until all were
        bound (``None``: not within ``timeout``; ``unbound`` then counts the rest)."""
        from streams.dev.localcluster import create_namespace, gang_pod

        create_namespace(self.core, PREFILL_NS)
        pods = [(f"prefill-{i}", f"prefill-{i}-{k}", g)
                for i, g in enumerate(gangs) for k in range(g)]
        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda p: self.core.create_namespaced_pod(
                PREFILL_NS, gang_pod(PREFILL_NS, p[1], gang=p[0], min_available=p[2], gpu=1)),
                pods))
        created = round(time.monotonic() - start, 1)
        bound_s, unbound = None, len(pods)
        while time.monotonic() - start < timeout:
            # the pods not yet bound: a short list that shrinks, not the whole namespace
            unbound = len(self.core.list_namespaced_pod(
                PREFILL_NS, field_selector="spec.nodeName=").items)
            if unbound == 0:
                bound_s = round(time.monotonic() - start, 1)
                break
            time.sleep(3)
        return {"gangs": len(gangs), "pods": len(pods), "gpus": sum(gangs),
                "create_s": created, "bound_s": bound_s, "unbound": unbound}

    def settle(self, quiet_s: float = 15.0, timeout: float = 600.0) -> dict[str, Any]:
        """After the chain's start on a filled cluster: wait until the sink's writes have not
        changed for ``quiet_s`` seconds (its Events on the prefill's pods written), so the window
        counts the plan's. Returns the seconds waited and the sink's writes meanwhile."""
        start = time.monotonic()
        first = last = self.sink_writes()
        since = start
        while time.monotonic() - start < timeout:
            time.sleep(5)
            now = self.sink_writes()
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                break
        return {"settle_s": round(since - start, 1), "sink_writes": last - first}

    def unfill(self, timeout: float = 300.0) -> float | None:
        """Delete the prefill's pods (one delete-collection, grace 0); seconds until they are
        gone (``None``: not within ``timeout``)."""
        start = time.monotonic()
        self.core.delete_collection_namespaced_pod(PREFILL_NS, grace_period_seconds=0)
        while time.monotonic() - start < timeout:
            if not self.core.list_namespaced_pod(PREFILL_NS, limit=1).items:
                return round(time.monotonic() - start, 1)
            time.sleep(3)
        return None

    def fill(self, count: int, timeout: float = 240.0) -> dict[str, Any]:
        """Create ``count`` pods of 1 GPU (gangs of 1, namespace ``gs-fill``, 8 threads) and
        wait until they are bound (``timeout`` seconds at most): the cluster a relist at scale
        lists. Returns the pods, the seconds to create them and to bind them (or ``None``)."""
        from streams.dev.localcluster import create_namespace, gang_pod

        create_namespace(self.core, "gs-fill")
        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: self.core.create_namespaced_pod(
                "gs-fill", gang_pod("gs-fill", f"fill-{i}", gang=f"fill-{i}", min_available=1,
                                    gpu=1)), range(count)))
        created = round(time.monotonic() - start, 1)
        bound_s = None
        while time.monotonic() - start < timeout:
            pods = self.core.list_namespaced_pod("gs-fill").items
            if sum(bool(p.spec.node_name) for p in pods) >= count:
                bound_s = round(time.monotonic() - start, 1)
                break
            time.sleep(2)
        return {"pods": count, "create_s": created, "bound_s": bound_s}

    def clean(self, prefix: str) -> None:
        """Delete what is left of the phase's pods and wait until they are gone."""
        from kubernetes.client.exceptions import ApiException

        for ns in sorted({j.namespace for j in self.jobs}):
            for p in self.core.list_namespaced_pod(f"{prefix}-{ns}").items:
                try:
                    self.core.delete_namespaced_pod(p.metadata.name, f"{prefix}-{ns}",
                                                    grace_period_seconds=0)
                except ApiException as err:
                    if err.status != 404:
                        raise
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(
                self.core.list_namespaced_pod(f"{prefix}-{ns}").items
                for ns in {j.namespace for j in self.jobs}):
            time.sleep(0.5)


def node_specs(nodes: int, gpus_per_node: int) -> list[Any]:
    """The fake nodes: ``node-<i>``, 64 cpu, 512Gi, ``gpus_per_node`` GPUs, 110 pods."""
    from streams.dev.localcluster import controlplane_module

    spec = controlplane_module().NodeSpec
    return [spec(f"node-{i:04d}", cpu="64", memory="512Gi", gpu=gpus_per_node)
            for i in range(nodes)]


def main(argv: list[str] | None = None) -> int:
    """Run the measurement; print the table and a JSON line. Returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000,
                    help="KWOK nodes of the local control plane (default 1000)")
    ap.add_argument("--gpus-per-node", type=int, default=8,
                    help="nvidia.com/gpu per node (default 8; 64 cpu, 512Gi, 110 pods)")
    ap.add_argument("--window", type=float, default=240.0,
                    help="seconds of each replay window (default 240)")
    ap.add_argument("--compress", type=float, default=500.0,
                    help="time compression of the trace (default 500)")
    ap.add_argument("--seed", type=int, default=4,
                    help="the plan's seed (default 4: its 240 s at 1,000 nodes hold every kind)")
    ap.add_argument("--plan", type=Path, help="replay this plan (JSONL of bench/workload.py)")
    ap.add_argument("--save-plan", type=Path, help="write the plan used here")
    ap.add_argument("--quick", action="store_true", help="100 nodes, a 60 s window")
    ap.add_argument("--occupancy", type=float, default=OCCUPANCY,
                    help="share of the cluster's GPUs held by long-running gangs drawn from the "
                         f"trace's GPUs per task, bound before both windows (default {OCCUPANCY}: "
                         "assumed, bench/workload.py OCCUPANCY; 0: an empty cluster)")
    ap.add_argument("--relist-pods", type=int, default=None,
                    help="after the windows, pods of 1 GPU to create (and bind) before timing the "
                         "watcher's relist again (default 2000 with --occupancy 0, else 0: the "
                         "prefill is the full cluster's pod count; 0: skip)")
    ap.add_argument("--json-only", action="store_true", help="print the JSON line alone")
    args = ap.parse_args(argv)
    if args.relist_pods is None:
        args.relist_pods = 0 if args.occupancy > 0 else 2000
    if args.quick:  # a tenth of the nodes, ten times the compression: the same arrival rate
        args.nodes, args.window = min(args.nodes, 100), min(args.window, 60.0)
        args.compress *= 10
        args.relist_pods = min(args.relist_pods, 200)
    if args.nodes < 1 or args.gpus_per_node < 1 or args.window <= 0:
        ap.error("--nodes, --gpus-per-node and --window must be positive")
    if not 0 <= args.occupancy < 1:
        ap.error("--occupancy must be in [0, 1)")
    say = (lambda _: None) if args.json_only else (lambda line: print(line, flush=True))
    try:
        jobs = read_plan(args.plan) if args.plan else make_plan(
            args.seed, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
            window_s=args.window, compress=args.compress, shares=Shares())
    except (ValueError, OSError) as err:
        print(f"cluster_scale: {err}", file=sys.stderr)
        return 2
    if args.save_plan:
        with open(args.save_plan, "w") as out:
            write_plan(jobs, out)
    from streams.dev.localcluster import controlplane_module
    from streams.dev.localkafka import broker_module

    result: dict[str, Any] = {"bench": "cluster-scale", "nodes": args.nodes,
                              "gpus_per_node": args.gpus_per_node, "window_s": args.window,
                              "compress": args.compress, "seed": args.seed,
                              "occupancy": args.occupancy, "plan": summary(jobs), "phases": {}}
    gangs = prefill_gangs(args.seed, args.nodes * args.gpus_per_node, args.occupancy)
    say(f"plan: {json.dumps(result['plan'])}")
    logdir = Path(tempfile.mkdtemp(prefix="gangstate-bench-scale-"))
    cluster = controlplane_module().LocalCluster(node_specs(args.nodes, args.gpus_per_node),
                                                 progress=say)
    broker = None
    runner = None
    try:
        t = time.monotonic()
        cluster.start(timeout=1800)
        result["cluster_start_s"] = round(time.monotonic() - t, 1)
        say(f"control plane with {args.nodes} nodes ready in {result['cluster_start_s']} s")
        broker = broker_module().LocalKafka()
        bootstrap = broker.start(timeout=180)
        runner = Runner(cluster, broker, bootstrap, jobs, logdir, say)
        runner.events.start()
        if gangs:
            result["prefill"] = runner.prefill(gangs)
            say(f"prefilled: {json.dumps(result['prefill'])}")
        base = runner.window("base", args.window, chain=False)
        runner.clean("base")
        time.sleep(5)  # the last scheduler Events of the phase: written late, still counted
        base["events"] = runner.events.of("base-")
        result["phases"]["base"] = phase_figures(base)
        say(f"without gangstate: {json.dumps(result['phases']['base'])}")
        runner.start_chain()
        say("chain and shim running")
        if gangs:  # its first listing holds the prefill's pods: their Events before the window
            result["settle"] = runner.settle()
            say(f"chain settled: {json.dumps(result['settle'])}")
        gs = runner.window("gs", args.window, chain=True)
        time.sleep(5)
        gs["events"] = runner.events.of("gs-")
        result["phases"]["gs"] = phase_figures(gs)
        say(f"with gangstate: {json.dumps(result['phases']['gs'])}")
        result["relist"] = runner.relist()
        say(f"relist: {json.dumps(result['relist'])}")
        if args.relist_pods:
            result["fill"] = runner.fill(args.relist_pods)
            say(f"filled: {json.dumps(result['fill'])}")
            time.sleep(10)  # the watcher publishes the fill's changes before it is restarted
            result["relist_full"] = runner.relist()
            say(f"relist with the fill: {json.dumps(result['relist_full'])}")
            for p in runner.core.list_namespaced_pod("gs-fill").items:
                runner.core.delete_namespaced_pod(p.metadata.name, "gs-fill",
                                                  grace_period_seconds=0)
        if gangs:
            result["unfill_s"] = runner.unfill()
        runner.clean("gs")
        result["alive"] = runner.chain.alive()
    finally:
        if runner is not None:
            runner.events.stop()
            if runner._lag_consumer is not None:
                runner._lag_consumer.close()
            if runner.chain is not None:
                runner.chain.stop()
        cluster.stop()
        if broker is not None:
            broker.stop()
    say(table(result))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
