"""``gangstate replay``: publish a historical trace into ``gang-events``.

By default a replay goes to topics of its own (``own_settings``: ``<prefix>replay-<name>.``,
app id ``<app id>-replay-<name>``), folded by a worker of its own, so that it never moves the
clocks of the live partitions; ``--into-live`` publishes into the live topics and first says on
stderr what that does to their clocks (``clock_warning``; docs/query.md, "Replaying history").

Where it sits: a producer. Each line of a ``gangstate.*/v1`` JSON-lines trace is validated with
the same decoder the worker uses, keyed by its gang id (computed from the object for kube
records by the membership rules of ``streams.core.spec``) and published unchanged with
kafka-python (acks=all). Pods of no gang are dropped and counted; a core/v1 Event is keyed by the
gang of its involved pod as seen earlier in the trace (unknown: dropped and counted); a malformed
line is reported with its line number, counted and skipped. The replay ends with one
``gangstate.tick/v1`` per partition at ``at``, so grace timers fire (contracts.md, "Time is an
input"). Nothing else is lost.

Clusters (docs/fleet.md): a record is of the cluster it names, or of ``default``; its key is
its gang's key within that cluster (``eu-1:team-a/llm``), and an Event is keyed by the gang of
its involved pod *in the same cluster*. ``cluster`` (``--cluster``) gives the records that name
none that cluster (``producers.clusters.line_in_cluster``: re-encoded with it; nothing changes
in ``default``), and the final ticks carry it.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field, replace as with_changes
from pathlib import Path
from typing import Callable, Iterable, Iterator

from producers.clusters import line_in_cluster
from streams.core.cluster import DEFAULT_CLUSTER, cluster_of_key
from streams.core.timefmt import format_time
from streams.settings import Settings, Topics
from streams.wire.contracts import parse_time
from streams.core.records import PodObserved, RosterObserved
from streams.wire.decoding import DecodeError, decode_input
from streams.wire.traces import read_lines

from streams.kafka.publishing import Publisher, ensure_topics


@dataclass
class ReplayReport:
    """Counts of one replay: ``published`` records (ticks excluded), ``ticks``, ``dropped`` by
    reason (``no-gang``, ``unknown-involved-pod``), and ``malformed`` as (file, line, reason)."""

    published: int = 0
    ticks: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    malformed: list[tuple[str, int, str]] = field(default_factory=list)


def _event_pod(raw: bytes) -> tuple[str, str] | None:
    """``(cluster, "ns/name")`` of the pod a core/v1 Event record is about, ``None`` for an
    Event of anything else."""
    record = json.loads(raw)
    obj = record.get("object") or {}
    inv = obj.get("involvedObject") or obj.get("regarding") or {}
    if inv.get("kind") != "Pod":
        return None
    return (record.get("cluster", DEFAULT_CLUSTER),
            f"{inv.get('namespace', '')}/{inv.get('name', '')}")


Reader = Callable[[Path], Iterable[tuple[int, bytes]]]
"""Reads one trace file into ``(line number, raw line)``: ``streams.wire.traces.read_lines``
for JSON lines; the CLI passes ``producers.watch.dump.trace_lines``, which also reads a cluster
dump (``kubectl get ... -o json``) as the records a watch would have published."""


def file_lines(paths: Iterable[Path], reader: Reader = read_lines,
               ) -> Iterator[tuple[str, int, bytes]]:
    """``(file, line number, raw line)`` of each trace, file after file, read by ``reader``."""
    for path in paths:
        for number, raw in reader(path):
            yield str(path), number, raw


def _event_time(raw: bytes) -> int:
    try:
        return parse_time(json.loads(raw)["observed_at"])
    except Exception:
        return 0  # malformed: keeps its place at the front; the decoder reports it


def merged_by_time(paths: Iterable[Path], reader: Reader = read_lines,
                   ) -> list[tuple[str, int, bytes]]:
    """All lines of several traces in ``observed_at`` order (stable: ties keep file order).

    Replaying several historical traces one after another would move the event-time clock back
    and forth; merged, the log is in time order, so each gang's outputs are those of its own
    trace folded alone (contracts.md, "Time is an input").
    """
    return sorted(file_lines(paths, reader), key=lambda item: _event_time(item[2]))


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
"""What a replay's name may be (it goes into topic names and a consumer group id): letters,
digits, ``-`` and ``_``, at most 64, starting with a letter or digit."""


def default_name(now: float | None = None) -> str:
    """A replay's name when none is given: its start time (``now``, Unix seconds; default the
    wall clock), UTC, as ``YYYYMMDD-HHMMSS``."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))


def own_settings(live: Settings, name: str) -> Settings:
    """The settings of a replay named ``name`` beside the live pipeline ``live``: topics
    ``<live prefix>replay-<name>.`` (``gangstate.replay-<name>.gang-events``, ...) and app id
    ``<live app id>-replay-<name>`` (its worker's consumer group and changelog); Kafka,
    partitions, fold settings and security as ``live``. Raises ``ValueError`` (one line) for a
    name ``NAME`` refuses."""
    if not NAME.fullmatch(name):
        raise ValueError(f"replay name {name!r}: use letters, digits, '-' and '_' "
                         f"(at most 64, starting with a letter or digit)")
    return with_changes(live, topics=Topics(f"{live.topics.prefix}replay-{name}."),
                        app_id=f"{live.app_id}-replay-{name}")


def time_span(lines: Iterable[tuple[str, int, bytes]]) -> tuple[int, int] | None:
    """Earliest and latest ``observed_at`` (microseconds) of ``lines``; malformed lines are
    left out; ``None`` when no line has a readable time."""
    times = [t for t in (_event_time(raw) for _f, _n, raw in lines) if t > 0]
    return (min(times), max(times)) if times else None


def _duration(micros: int) -> str:
    seconds = micros / 1_000_000
    if seconds >= 86_400:
        return f"{seconds / 86_400:.1f} days"
    if seconds >= 3_600:
        return f"{seconds / 3_600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def clock_warning(topic: str, clocks: dict[int, int | None] | None,
                  span: tuple[int, int] | None) -> str:
    """What a replay into the live ``topic`` does to its partitions' clocks, for stderr.

    ``clocks``: partition -> latest event time it holds (``streams.kafka.reading.
    partition_clocks``; ``None`` when they could not be read); ``span``: the trace's earliest
    and latest ``observed_at`` (``time_span``). A partition's clock only moves forward, so a
    replayed record older than its partition's clock is folded at that clock and every timer
    of its gang due by then fires at once.
    """
    head = (f"gangstate replay --into-live: publishing into the live {topic}, folded by the "
            f"live worker among the live records (its outputs reach the live sink and "
            f"scheduler shim). ")
    effect = ("A partition's clock only moves forward: each replayed record older than its "
              "partition's clock is folded at that clock, and every timer of its gang due by "
              "then fires at once (hold warnings such as GangMembersInsufficient, "
              "GangMembersStranded, GangPermitTimeout that a fold of the trace alone does not "
              "give). Without --into-live a replay gets topics of its own.")
    known = sorted(c for c in (clocks or {}).values() if c is not None)
    if clocks is None:
        return head + "Its partitions' clocks could not be read. " + effect
    if not clocks:
        return (head + "It does not exist yet: the trace's times set its partitions' clocks, "
                "and live records older than the trace's will be folded late. " + effect)
    if not known:
        return (head + f"Its {len(clocks)} partitions hold no record yet: the trace's times "
                "set their clocks, and live records older than the trace's will be folded "
                "late. " + effect)
    newest = known[-1]
    where = (f"Its partitions' clocks are at {format_time(newest)} (newest; oldest "
             f"{format_time(known[0])}; {len(known)} of {len(clocks)} partitions hold records)")
    if span is None:
        return head + f"{where}; the trace has no readable time. " + effect
    first = span[0]
    if first >= newest:
        return (head + f"{where}; the trace starts at "
                f"{format_time(first)}, after them, so no timer fires early. " + effect)
    return (head + f"{where} and the trace starts at "
            f"{format_time(first)}, {_duration(newest - first)} earlier. " + effect)


def reuse_warning(prefix: str, newest: int, span: tuple[int, int] | None) -> str:
    """What a replay named before does to its own topics (``prefix``), for stderr: they
    already hold records up to ``newest`` (event time, microseconds), so this trace's records
    older than that are folded at that clock, as into live topics (``clock_warning``)."""
    head = (f"gangstate replay: the replay's topics {prefix}* already hold records up to "
            f"{format_time(newest)}")
    if span is None or span[0] >= newest:
        return head + "; these traces continue that replay."
    return (head + f" and these traces start at {format_time(span[0])}, "
            f"{_duration(newest - span[0])} earlier: their records older than that clock fire "
            f"their gangs' timers at once; give a new --name for a replay of its own.")


def replay(lines: Iterable[tuple[str, int, bytes]], settings: Settings, *,
           rate: float | None = None, at: int | None = None,
           publisher: Publisher | None = None,
           on_malformed: Callable[[str, int, str], None] | None = None,
           cluster: str = DEFAULT_CLUSTER, rosters: bool = True) -> ReplayReport:
    """Publish every record of ``lines`` (``(file, line number, raw)``, see ``file_lines`` and
    ``merged_by_time``) in order, then tick every partition.

    ``rate``: records per second (``None``: as fast as the broker takes them). ``at``: event time
    of the final ticks in microseconds (``None``: no ticks). ``cluster``: the cluster of the
    records that name none (``--cluster``; ``default``: published unchanged). ``rosters``:
    publish the watch producers' ``gangstate.roster/v1`` records, each to the partition it is
    for (false: dropped, counted as ``roster``: a roster from the past would delete the members
    a live table has gained since; ``--into-live``). Raises
    ``OSError`` for an unreadable file and ``kafka.errors.KafkaError`` when records cannot be
    delivered.
    """
    report = ReplayReport()
    own = publisher is None
    if own:
        ensure_topics(settings)
    pub = publisher or Publisher(settings, client_id="gangstate-replay")
    topic = settings.topics.gang_events
    pods: dict[tuple[str, str], str] = {}  # (cluster, "ns/name") -> the key of its gang
    interval = 1.0 / rate if rate else 0.0
    next_send = time.monotonic()
    try:
        for path, number, raw in lines:
            raw = line_in_cluster(raw, cluster)
            try:
                decoded = decode_input(raw)
            except DecodeError as err:
                report.malformed.append((path, number, str(err)))
                if on_malformed:
                    on_malformed(path, number, str(err))
                continue
            key = decoded.key
            if decoded.record is None:
                if decoded.skipped == "events":
                    pod = _event_pod(raw)
                    key = pods.get(pod) if pod else None
                    if key is None:
                        report.dropped["unknown-involved-pod"] += 1
                        continue
                else:
                    report.dropped[decoded.skipped or "unknown"] += 1
                    continue
            rec = decoded.record
            if isinstance(rec, RosterObserved) and not rosters:
                report.dropped["roster"] += 1
                continue
            if isinstance(rec, PodObserved) and key is not None:
                pods[(cluster_of_key(key), f"{rec.namespace}/{rec.name}")] = key
            if interval:
                delay = next_send - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                next_send = max(next_send + interval, time.monotonic() - 1.0)
            # a roster concerns the gangs of one partition: it goes to that partition
            pub.send(topic, key, raw.strip(),
                     rec.partition if isinstance(rec, RosterObserved) else None)
            report.published += 1
        if at is not None:
            report.ticks = (pub.tick_all_partitions(at) if cluster == DEFAULT_CLUSTER
                            else pub.tick_all_partitions(at, cluster=cluster))
        pub.flush()
    finally:
        if own:
            pub.close()
    return report
