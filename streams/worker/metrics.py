"""Prometheus metrics of the worker (``gangstate_*``, documented in docs/metrics.md).

Where it sits: the streaming shell. The agent in ``streams.worker.app`` counts what it folds
(``WorkerMetrics.folded``, ``dead_lettered``, ``fold_seconds``); the gauges of the gang table are
computed at scrape time by ``TableCollector`` from the table itself, so they can never drift from
it. Each app has its own ``CollectorRegistry`` (tests build several apps in one process); the
views in ``streams.worker.web`` serve it at ``GET /metrics``.

Must not: decide anything about gangs (phases and holds come from ``streams.core``), or register
in prometheus-client's global default registry.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Mapping

from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram,
                               PlatformCollector, ProcessCollector, generate_latest)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streams.wire.contracts import (ACK_SCHEMA, CAPACITY_SCHEMA, CYCLE_SCHEMA, KUBE_SCHEMA,
                                    PREEMPTION_SCHEMA, ROSTER_SCHEMA, SUMMARY_SCHEMA,
                                    TICK_SCHEMA)
from streams.core import decide, episode
from streams.core.cluster import DEFAULT_CLUSTER
from streams.core.native import SCHEDULERS
from streams.core.records import (AckObserved, CapacityObserved, CycleObserved, GangSummarized,
                                  PodGroupObserved, PodObserved, PreemptionObserved,
                                  RosterObserved, Tick)
from streams.core.state import GangState
from streams.wire.decoding import Decoded
from streams.query.answers import PHASES

FOLD_BUCKETS = (0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                0.01, 0.025, 0.05, 0.1, 0.5, 1.0)
"""Buckets of ``gangstate_fold_seconds`` in seconds: a record folds in tens of microseconds;
the upper buckets catch timer bursts (one record firing many gangs' grace periods)."""

_SCHEMAS = {PodObserved: KUBE_SCHEMA, PodGroupObserved: KUBE_SCHEMA, CycleObserved: CYCLE_SCHEMA,
            AckObserved: ACK_SCHEMA, GangSummarized: SUMMARY_SCHEMA, Tick: TICK_SCHEMA,
            PreemptionObserved: PREEMPTION_SCHEMA, CapacityObserved: CAPACITY_SCHEMA,
            RosterObserved: ROSTER_SCHEMA}


def schema_of(decoded: Decoded) -> str:
    """The ``schema`` of the wire record ``decoded`` came from (a valid record that concerns no
    gang is a ``gangstate.kube/v1`` record: a pod of no gang or a core/v1 Event)."""
    if decoded.record is None:
        return KUBE_SCHEMA
    return _SCHEMAS.get(type(decoded.record), "other")  # a count never stops the worker


OTHER_CLUSTER = "other"
"""The ``cluster`` label value of the gangs of every cluster past ``max_clusters``."""
MAX_CLUSTERS = 20
"""How many clusters the gang gauges name by default (``GANGSTATE_METRICS_MAX_CLUSTERS``)."""


def labelled_clusters(clusters: Iterable[str], max_clusters: int) -> frozenset[str]:
    """The clusters of ``clusters`` whose gangs keep their own ``cluster`` label: the first
    ``max_clusters`` in cluster id order (code points: ``a-1`` < ``eu-1`` < ``us-2``). Sorted,
    not first seen, so that every scrape of every worker that holds the same clusters picks
    the same ones, whatever the order their records came in or the worker restarted."""
    return frozenset(sorted(set(clusters))[:max(max_clusters, 0)])


class TableCollector(Collector):
    """Scrape-time gauges over a ``key -> GangState`` mapping (the worker's gangs; keys
    ``eu-1:team-a/llm``, bare ids in ``default``: ``streams.core.cluster``).

    ``gangstate_gangs{cluster,scheduler,phase}``: gangs per phase (every phase, zero
    included). ``gangstate_pods_held_preenqueue{cluster,scheduler,reason}``: pending members of
    gangs that ``streams.core.decide.hold`` holds, by hold reason (every reason, zero
    included). ``gangstate_scheduler_failed_events_per_minute{cluster,gang}``: the scheduler's
    FailedScheduling Events about the gang's pods in the last 60 s of event time up to
    ``clock(key)`` (the clock of the fold of its partition, ticks included; without ``clock``,
    the gang's own) (``streams.core.episode.per_minute``), for gangs with at least one (a gang
    without any has no series). Raises nothing for a key that vanishes during a scrape.

    ``cluster`` is bounded: the clusters with gangs in the mapping at the scrape keep their id
    as label value up to ``max_clusters`` of them (``labelled_clusters``: the first in cluster
    id order); the gangs of the others are summed under ``cluster="other"`` (a storm's ``gang``
    label is then the gang's key, ``c21:team-a/llm``, so that two of them stay apart; a
    cluster really named ``other`` shares its series). Each labelled cluster has every
    scheduler, phase and reason series (zero included), ``other`` has them when some cluster
    is counted there; an empty table has the ``default`` cluster's zeros.
    """

    def __init__(self, states: Mapping[str, GangState],
                 clock: Callable[[str], int | None] | None = None,
                 max_clusters: int = MAX_CLUSTERS) -> None:
        self.states = states
        self.clock = clock
        self.max_clusters = max_clusters

    def describe(self) -> Iterable[Metric]:
        """The three families with no samples (lets the registry check names without reading
        the table)."""
        return self._families()

    def _families(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily("gangstate_gangs",
                                  "Gangs in this worker's table, by cluster, scheduler and "
                                  "phase", labels=["cluster", "scheduler", "phase"]),
                GaugeMetricFamily("gangstate_pods_held_preenqueue",
                                  "Pending pods of gangs held at PreEnqueue, by cluster, "
                                  "scheduler and hold reason",
                                  labels=["cluster", "scheduler", "reason"]),
                GaugeMetricFamily("gangstate_scheduler_failed_events_per_minute",
                                  "FailedScheduling Events of the gang's pods in the last 60 s "
                                  "of event time", labels=["cluster", "gang"])]

    def collect(self) -> Iterator[Metric]:
        """Read every gang once and yield the three gauges."""
        read: list[tuple[str, str, GangState]] = []  # (cluster, key, state)
        for key in list(self.states):
            state = self.states.get(key)
            if state is not None:
                read.append((state.cluster, key, state))
        kept = labelled_clusters((c for c, _, _ in read), self.max_clusters)
        if not read:
            kept = frozenset({DEFAULT_CLUSTER})
        labels = sorted(kept) + ([OTHER_CLUSTER] if any(c not in kept for c, _, _ in read)
                                 else [])
        phases = dict.fromkeys(((c, s, p) for c in labels for s in SCHEDULERS for p in PHASES), 0)
        held = dict.fromkeys(((c, s, r) for c in labels for s in SCHEDULERS
                              for r in decide.HELD_REASONS), 0)
        storms: dict[tuple[str, str], int] = {}
        for cluster, key, state in read:
            label = cluster if cluster in kept else OTHER_CLUSTER
            scheduler = state.scheduler
            at = (label, scheduler, state.phase)
            phases[at] = phases.get(at, 0) + 1
            found = decide.hold(state)
            if found is not None:
                at = (label, scheduler, found[0])
                held[at] = held.get(at, 0) + state.pending
            if state.storm:
                now = None if self.clock is None else self.clock(key)
                rate = episode.per_minute(state.storm, max(state.clock, now or 0))
                if rate:
                    gang = state.gang if label == cluster else key
                    storms[label, gang] = storms.get((label, gang), 0) + rate
        gangs, pods, storm = self._families()
        for (cluster, scheduler, phase), n in phases.items():
            gangs.add_metric([cluster, scheduler, phase], n)
        for (cluster, scheduler, reason), n in held.items():
            pods.add_metric([cluster, scheduler, reason], n)
        for (cluster, gang), rate in sorted(storms.items()):
            storm.add_metric([cluster, gang], rate)
        yield gangs
        yield pods
        yield storm


class WorkerMetrics:
    """The counters and histogram of one worker app, in their own registry.

    ``gangstate_records_total{schema}``, ``gangstate_dead_letters_total{reason}``
    (``invalid-record``, ``internal-error`` or ``output-too-large``),
    ``gangstate_records_rekeyed_total`` (records keyed elsewhere than their gang, re-published
    to it), ``gangstate_diagnostics_total{reason}``,
    ``gangstate_commands_total{type}``, ``gangstate_acks_total{outcome}``,
    ``gangstate_fold_seconds`` (seconds in ``PartitionFold.feed`` per record), plus the
    standard ``process_*`` and ``python_info`` metrics.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        r = self.registry
        self.records = Counter("gangstate_records", "gang-events records decoded, by schema",
                               ["schema"], registry=r)
        self.dead_letters = Counter("gangstate_dead_letters",
                                    "Records sent to dead-letters, by reason class",
                                    ["reason"], registry=r)
        self.rekeyed_records = Counter(
            "gangstate_records_rekeyed", "Records keyed elsewhere than their gang (another key, "
            "none, another partition), re-published under the gang's key", registry=r)
        self.diagnostics = Counter("gangstate_diagnostics", "Diagnostics emitted, by reason",
                                   ["reason"], registry=r)
        self.commands = Counter("gangstate_commands", "Commands issued, by type", ["type"],
                                registry=r)
        self.acks = Counter("gangstate_acks", "Shim acks folded, by outcome", ["outcome"],
                            registry=r)
        self.fold_seconds = Histogram("gangstate_fold_seconds",
                                      "Seconds spent in PartitionFold.feed per record",
                                      buckets=FOLD_BUCKETS, registry=r)
        self._record_children: dict[str, Any] = {}

    def folded(self, decoded: Decoded, outputs: Iterable[Mapping[str, object]]) -> None:
        """Count one decoded record and the outputs its fold produced (diagnostics by reason,
        commands by type; gang summaries are not counted here: they come back as records)."""
        schema = schema_of(decoded)
        child = self._record_children.get(schema)
        if child is None:  # labels() takes a lock and builds a key: once per schema
            child = self._record_children[schema] = self.records.labels(schema)
        child.inc()
        if isinstance(decoded.record, AckObserved):
            self.acks.labels(decoded.record.outcome).inc()
        for out in outputs:
            if out["schema"] == decide.DIAGNOSTIC_SCHEMA:
                self.diagnostics.labels(str(out["reason"])).inc()
            elif out["schema"] == decide.COMMAND_SCHEMA:
                self.commands.labels(str(out["type"])).inc()

    def rekeyed(self) -> None:
        """Count one record re-published under its gang's key (it came keyed elsewhere)."""
        self.rekeyed_records.inc()

    def dead_lettered(self, reason: str) -> None:
        """Count one dead letter; ``reason`` is ``invalid-record`` (failed validation, a bound
        of docs/contracts.md "Limits" included), ``internal-error`` (the fold raised) or
        ``output-too-large`` (an output over ``app.MAX_OUTPUT_BYTES``, not sent)."""
        self.dead_letters.labels(reason).inc()

    def exposition(self) -> tuple[bytes, str]:
        """``(body, content type)`` of the registry in the Prometheus text format."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
