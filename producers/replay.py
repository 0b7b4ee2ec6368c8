"""``gangstate replay``: publish a historical trace into ``gang-events``.

Where it sits: a producer. Each line of a ``gangstate.*/v1`` JSON-lines trace is validated with
the same decoder the worker uses, keyed by its gang id (computed from the object for kube
records by the membership rules of ``streams.core.spec``) and published unchanged with
kafka-python (acks=all). Pods of no gang are dropped and counted; a core/v1 Event is keyed by the
gang of its involved pod as seen earlier in the trace (unknown: dropped and counted); a malformed
line is reported with its line number, counted and skipped. The replay ends with one
``gangstate.tick/v1`` per partition at ``at``, so grace timers fire (contracts.md, "Time is an
input"). Nothing else is lost.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from streams.kafka.settings import Settings
from streams.wire.contracts import parse_time
from streams.core.records import PodObserved
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


def _event_pod(raw: bytes) -> str | None:
    obj = json.loads(raw).get("object") or {}
    inv = obj.get("involvedObject") or obj.get("regarding") or {}
    if inv.get("kind") != "Pod":
        return None
    return f"{inv.get('namespace', '')}/{inv.get('name', '')}"


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


def replay(lines: Iterable[tuple[str, int, bytes]], settings: Settings, *,
           rate: float | None = None, at: int | None = None,
           publisher: Publisher | None = None,
           on_malformed: Callable[[str, int, str], None] | None = None) -> ReplayReport:
    """Publish every record of ``lines`` (``(file, line number, raw)``, see ``file_lines`` and
    ``merged_by_time``) in order, then tick every partition.

    ``rate``: records per second (``None``: as fast as the broker takes them). ``at``: event time
    of the final ticks in microseconds (``None``: no ticks). Raises ``OSError`` for an unreadable
    file and ``kafka.errors.KafkaError`` when records cannot be delivered.
    """
    report = ReplayReport()
    own = publisher is None
    if own:
        ensure_topics(settings)
    pub = publisher or Publisher(settings, client_id="gangstate-replay")
    topic = settings.topics.gang_events
    pods: dict[str, str] = {}
    interval = 1.0 / rate if rate else 0.0
    next_send = time.monotonic()
    try:
        for path, number, raw in lines:
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
            if isinstance(rec, PodObserved) and key is not None:
                pods[f"{rec.namespace}/{rec.name}"] = key
            if interval:
                delay = next_send - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                next_send = max(next_send + interval, time.monotonic() - 1.0)
            pub.send(topic, key, raw.strip())
            report.published += 1
        if at is not None:
            report.ticks = pub.tick_all_partitions(at)
        pub.flush()
    finally:
        if own:
            pub.close()
    return report
