"""The cluster a producer's records are of (issue 27, docs/fleet.md): one place that stamps it.

Where it sits: between a producer (the watch's ``Watcher``, ``gangstate replay``, a cluster dump
read by ``producers.watch.dump``) and what it publishes or hands on. A producer serves one
cluster (``GANGSTATE_CLUSTER``, ``--cluster``): outside ``default``, every record it
publishes says so in its ``cluster`` field and its Kafka key is the gang's key within that
cluster (``streams.core.cluster.key_of``: ``eu-1:team-a/llm``), so the worker folds each
cluster's gangs apart without re-keying anything. In ``default`` nothing changes, byte for byte:
a record without ``cluster`` is of ``default`` (contracts).

A record that already names a cluster keeps its own (a trace of several clusters replayed with
``--cluster``): only records without one are given it.

Must not: decide anything about gangs, or rename what a record names (the record keeps the
names its cluster uses; only ``cluster`` and the key say which cluster).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from streams.core.cluster import DEFAULT_CLUSTER, key_of


def in_cluster(record: dict[str, Any], cluster: str) -> dict[str, Any]:
    """``record`` with ``"cluster": cluster`` when it has no ``cluster`` and ``cluster`` is not
    ``default``; else ``record`` itself (the same object). Pure."""
    if cluster == DEFAULT_CLUSTER or "cluster" in record:
        return record
    return {**record, "cluster": cluster}


def line_in_cluster(raw: bytes, cluster: str) -> bytes:
    """One JSON line of a trace given ``cluster`` as ``in_cluster`` gives it (re-encoded
    compactly, its other fields in their order); ``raw`` itself when nothing changes: in
    ``default``, for a record that names its cluster, and for a line that is no JSON object
    (the decoder reports it, as it would have)."""
    if cluster == DEFAULT_CLUSTER:
        return raw
    try:
        record = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(record, dict) or "cluster" in record:
        return raw
    return json.dumps(in_cluster(record, cluster), separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


class InCluster:
    """A record sink (``streams.kafka.publishing.Publisher`` or a test double) whose records
    are of ``cluster``: ``send_json`` stamps each record (``in_cluster``) and keys it within
    the cluster (``key_of``; no key stays no key: a tick or a dead letter goes where it went),
    ``tick_all_partitions`` ticks with the cluster and ``roster_all_partitions`` sends rosters
    of the cluster (each absent when the wrapped sink has none);
    everything else (``flush``, ``sent``, ``failed``, ``close``) is the wrapped sink's. Used
    outside ``default`` only (``for_cluster``)."""

    def __init__(self, sink: Any, cluster: str) -> None:
        self.sink, self.cluster = sink, cluster

    def send_json(self, topic: str, key: str | None, record: dict[str, Any],
                  partition: int | None = None) -> None:
        self.sink.send_json(topic, None if key is None else key_of(self.cluster, key),
                            in_cluster(record, self.cluster), partition)

    @property
    def tick_all_partitions(self) -> Callable[[int], int]:
        tick = self.sink.tick_all_partitions  # AttributeError when the sink sends no ticks
        return lambda at_micros: int(tick(at_micros, cluster=self.cluster))

    @property
    def roster_all_partitions(self) -> Callable[[int, Any], int]:
        roster = self.sink.roster_all_partitions  # AttributeError when the sink sends none
        return lambda at_micros, gangs: int(roster(at_micros, gangs, cluster=self.cluster))

    def flush(self) -> None:
        self.sink.flush()

    def __getattr__(self, name: str) -> Any:
        if name == "sink":  # not set yet (a copy under way): no recursion
            raise AttributeError(name)
        return getattr(self.sink, name)


def for_cluster(sink: Any, cluster: str) -> Any:
    """``sink`` itself in ``default`` (nothing stamped, nothing re-keyed: byte for byte as
    before fleets), else ``InCluster(sink, cluster)``."""
    return sink if cluster == DEFAULT_CLUSTER else InCluster(sink, cluster)
