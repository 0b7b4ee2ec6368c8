"""Publishing into ``gang-events``: topic creation, a durable producer, per-partition ticks.

Where it sits: the producer side of the pipeline. ``gangstate replay``, the watch producer and
the scheduler shim publish through ``Publisher``; it only moves bytes (kafka-python, acks=all,
idempotent, retries), never decides anything about gangs.

Errors: ``Publisher.flush`` raises ``kafka.errors.KafkaError`` subclasses when a record could not
be delivered after retries; callers count and report them.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterable, Mapping

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from streams.core.cluster import DEFAULT_CLUSTER, key_of
from streams.kafka.partitions import partition_of
from streams.settings import Settings
from streams.wire.contracts import ROSTER_SCHEMA, TICK_SCHEMA
from streams.core.timefmt import format_time

log = logging.getLogger(__name__)


INPUT_TOPIC_CONFIG = {"message.timestamp.type": "LogAppendTime"}
"""Topic configuration of ``gang-events``: the broker stamps each record with its own clock
when it appends it, so the Kafka timestamp the worker bounds ``observed_at`` by
(``streams.wire.decoding.check_skew``) is not the producer's to choose (with ``CreateTime`` a
producer may claim up to the broker's ``message.timestamp.after.max.ms`` ahead, one hour by
default on Kafka 4)."""


DEAD_LETTER_RETENTION_MS = 7 * 24 * 3600 * 1000
"""How long ``dead-letters`` keeps a dead letter, ms (7 days; set when gangstate creates the
topic, docs/contracts.md "Dead letters")."""
DEAD_LETTER_TOPIC_CONFIG = {"retention.ms": str(DEAD_LETTER_RETENTION_MS)}
"""Topic configuration of ``dead-letters``."""


def ensure_topics(settings: Settings) -> None:
    """Create gangstate's topics when absent: ``gang-events`` and the outputs with
    ``settings.partitions`` partitions (outputs follow the input's partitioning so that Faust
    co-partitions them), ``dead-letters`` likewise; ``gang-events`` with
    ``INPUT_TOPIC_CONFIG``, ``dead-letters`` with ``DEAD_LETTER_TOPIC_CONFIG``. Replication factor 1 on the embedded broker; an existing topic is
    left as it is. Raises ``kafka.errors.KafkaError`` when the
    broker cannot be reached."""
    assert settings.bootstrap, "KAFKA_BOOTSTRAP_SERVERS is not set"
    admin = KafkaAdminClient(**settings.kafka_python(client_id="gangstate-admin"))
    try:
        existing = set(admin.list_topics())
        t = settings.topics
        configs = {t.gang_events: INPUT_TOPIC_CONFIG, t.dead_letters: DEAD_LETTER_TOPIC_CONFIG}
        wanted = [NewTopic(name, settings.partitions, 1, topic_configs=configs.get(name, {}))
                  for name in (t.gang_events, t.diagnostics, t.commands, t.dead_letters)
                  if name not in existing]
        if wanted:
            try:
                admin.create_topics(wanted)
            except TopicAlreadyExistsError:
                pass
    finally:
        admin.close()


def roster_records(at_micros: int, gangs: Mapping[str, Iterable[str]], partitions: int,
                   cluster: str = DEFAULT_CLUSTER) -> list[dict[str, Any]]:
    """The ``gangstate.roster/v1`` records of ``gangs`` (gang id -> pod uids) for a topic of
    ``partitions`` partitions, the one for partition ``p`` at index ``p``: each names the gangs
    whose key (``key_of(cluster, gang)``) Kafka's partitioner puts there, uids sorted; a
    partition with none gets an empty roster (its gangs of the cluster have no pod left)."""
    by_partition: list[dict[str, list[str]]] = [{} for _ in range(partitions)]
    for gang in sorted(gangs):
        by_partition[partition_of(key_of(cluster, gang), partitions)][gang] = sorted(gangs[gang])
    return [{"schema": ROSTER_SCHEMA, "observed_at": format_time(at_micros),
             **({} if cluster == DEFAULT_CLUSTER else {"cluster": cluster}),
             "partition": p, "partitions": partitions, "gangs": named}
            for p, named in enumerate(by_partition)]


class Publisher:
    """A kafka-python producer for ``gang-events`` (and any other topic) with gangstate's
    delivery settings: ``acks='all'``, idempotence, retries, keys as UTF-8 gang ids.

    ``send`` is asynchronous; ``flush`` waits for every outstanding record and raises the first
    delivery error. ``sent`` counts records handed to the producer, ``failed`` the ones whose
    delivery failed.
    """

    def __init__(self, settings: Settings, client_id: str = "gangstate-producer",
                 **overrides: Any) -> None:
        assert settings.bootstrap, "KAFKA_BOOTSTRAP_SERVERS is not set"
        self.settings = settings
        config: dict[str, Any] = settings.kafka_python(
            client_id=client_id, acks="all",
            enable_idempotence=True, retries=10, linger_ms=5,
            max_in_flight_requests_per_connection=5,
        )
        config.update(overrides)
        self.producer = KafkaProducer(**config)
        self.sent = 0
        self.failed = 0
        self._futures: list[Any] = []

    def send(self, topic: str, key: str | None, value: bytes,
             partition: int | None = None) -> None:
        """Queue one record (``value`` already-encoded JSON bytes)."""
        future = self.producer.send(topic, key=None if key is None else key.encode("utf-8"),
                                    value=value, partition=partition)
        self._futures.append(future)
        self.sent += 1
        if len(self._futures) >= 10_000:
            self._collect()

    def send_json(self, topic: str, key: str | None, record: dict[str, Any],
                  partition: int | None = None) -> None:
        """Queue one record given as a JSON-ready dict."""
        self.send(topic, key, json.dumps(record, separators=(",", ":")).encode(), partition)

    def tick_all_partitions(self, at_micros: int, cluster: str = DEFAULT_CLUSTER) -> int:
        """Send one ``gangstate.tick/v1`` at event time ``at_micros`` to every partition of
        ``gang-events`` (how a replay ends, contracts.md "Time is an input"); returns the count.
        ``cluster``: the cluster of the producer's clock, written outside ``default``
        (docs/fleet.md)."""
        topic = self.settings.topics.gang_events
        parts = self.producer.partitions_for(topic) or set(range(self.settings.partitions))
        tick = {"schema": TICK_SCHEMA, "observed_at": format_time(at_micros),
                **({} if cluster == DEFAULT_CLUSTER else {"cluster": cluster})}
        for p in sorted(parts):
            self.send_json(topic, None, tick, partition=p)
        return len(parts)

    def roster_all_partitions(self, at_micros: int, gangs: Mapping[str, Iterable[str]],
                              cluster: str = DEFAULT_CLUSTER) -> int:
        """Send one ``gangstate.roster/v1`` at event time ``at_micros`` to every partition of
        ``gang-events``, each naming the gangs of ``gangs`` (gang id -> pod uids) whose key
        (``key_of(cluster, gang)``) lands on it, with their uids sorted (an empty roster for a
        partition with none: its gangs of the cluster have no pod left); returns the count.
        ``cluster`` as for ``tick_all_partitions``."""
        topic = self.settings.topics.gang_events
        count = len(self.producer.partitions_for(topic) or range(self.settings.partitions))
        records = roster_records(at_micros, gangs, count, cluster)
        for p, record in enumerate(records):
            self.send_json(topic, None, record, partition=p)
        return count

    def _collect(self) -> None:
        futures, self._futures = self._futures, []
        first_error: Exception | None = None
        for future in futures:
            try:
                future.get(timeout=60)
            except Exception as err:  # delivery failed after retries
                self.failed += 1
                first_error = first_error or err
        if first_error is not None:
            raise first_error

    def flush(self) -> None:
        """Wait until every queued record is acknowledged by all in-sync replicas. Raises the
        first delivery error (a ``kafka.errors.KafkaError``)."""
        self.producer.flush()
        self._collect()

    def close(self) -> None:
        """Flush and close the producer."""
        try:
            self.flush()
        finally:
            self.producer.close()
