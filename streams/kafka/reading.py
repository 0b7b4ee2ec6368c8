"""``gangstate tap``: print the records of a topic as JSON lines, for auditing.

Where it sits: a read-only consumer beside the pipeline (kafka-python). It joins no consumer
group (partitions are assigned by hand) so tapping never disturbs the worker, and it prints each
record's value as one JSON line (a value that is not JSON is printed as a JSON string). With
``--schema`` it keeps only records whose ``schema`` matches (``gang-events`` carries several).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Iterator

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from streams.core.cluster import DEFAULT_CLUSTER
from streams.settings import KafkaSecurity, Settings


def read_topic(settings: Settings, topic: str, *, from_beginning: bool = True,
               follow: bool = False, idle_seconds: float = 1.0,
               timeout_seconds: float | None = None) -> Iterator[tuple[str | None, Any]]:
    """Yield ``(key, value)`` for the records of ``topic`` (values JSON-decoded when possible;
    ``None`` for a tombstone).

    Without ``follow`` it stops at the end offsets it saw when it started; with ``follow`` it
    keeps reading until interrupted or ``timeout_seconds`` (``None``: forever) have passed.
    ``idle_seconds`` is the poll interval. Raises ``kafka.errors.KafkaError`` when the broker
    cannot be reached.
    """
    assert settings.bootstrap, "KAFKA_BOOTSTRAP_SERVERS is not set"
    consumer = KafkaConsumer(**settings.kafka_python(
        enable_auto_commit=False, group_id=None, consumer_timeout_ms=int(idle_seconds * 1000)))
    try:
        parts = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        if not tps:
            return
        consumer.assign(tps)
        if from_beginning:
            consumer.seek_to_beginning(*tps)
        else:
            consumer.seek_to_end(*tps)
        end = consumer.end_offsets(tps) if not follow else {}
        # without follow: the partitions not read up to their end offset yet (a busy topic,
        # e.g. during a scheduler's storm, never leaves the consumer idle: stop at the ends)
        left = set() if follow else {tp.partition for tp in tps
                                     if end[tp] > consumer.position(tp)}
        if not follow and not left:
            return
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        while True:
            for msg in consumer:
                if not follow:
                    if msg.partition not in left:
                        continue  # past its end offset: read again at the next call
                    if msg.offset + 1 >= end[TopicPartition(topic, msg.partition)]:
                        left.discard(msg.partition)
                key = None if msg.key is None else msg.key.decode("utf-8", "replace")
                value: Any = None  # a tombstone (a gang removed from the table)
                if msg.value is not None:
                    try:
                        value = json.loads(msg.value)
                    except ValueError:
                        value = msg.value.decode("utf-8", "replace")
                yield key, value
                if not follow and not left:
                    return
            if not follow and all(consumer.position(tp) >= end[tp] for tp in tps):
                return
            if deadline is not None and time.monotonic() > deadline:
                return
    finally:
        consumer.close()


class NoSuchTopic(LookupError):
    """The topic does not exist on the broker."""


def tap(settings: Settings, topic: str, *, from_beginning: bool, follow: bool,
        schema: str | None = None, write: Callable[[str], Any] = print,
        cluster: str | None = None) -> int:
    """Print the topic's records as JSON lines; returns how many were printed: with ``schema``
    only those of that schema, with ``cluster`` only those of that cluster (their
    ``cluster`` field; absent: ``default``). Raises ``NoSuchTopic`` when the broker has no
    such topic."""
    probe = KafkaConsumer(**settings.kafka_python(group_id=None))
    try:
        if topic not in probe.topics():
            raise NoSuchTopic(topic)
    finally:
        probe.close()
    count = 0
    for _key, value in read_topic(settings, topic, from_beginning=from_beginning,
                                  follow=follow):
        if schema and not (isinstance(value, dict) and value.get("schema") == schema):
            continue
        if cluster is not None and not (isinstance(value, dict) and value.get(
                "cluster", DEFAULT_CLUSTER) == cluster):
            continue
        write(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        count += 1
    return count


def wait_caught_up(settings: Settings, timeout_seconds: float,
                   alive: Callable[[], bool] = lambda: True, poll_seconds: float = 0.5) -> bool:
    """Wait until the worker's consumer group (``settings.app_id``) has committed offsets at the
    end of every ``gang-events`` partition, i.e. it has processed (and Faust has committed)
    everything published so far. Returns ``False`` on timeout or when ``alive()`` turns false
    (the worker died)."""
    assert settings.bootstrap, "KAFKA_BOOTSTRAP_SERVERS is not set"
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(**settings.kafka_python(client_id="gangstate-tap"))
    consumer = KafkaConsumer(**settings.kafka_python(group_id=None))
    try:
        topic = settings.topics.gang_events
        tps = [TopicPartition(topic, p)
               for p in sorted(consumer.partitions_for_topic(topic) or set())]
        end = consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline and alive():
            try:
                committed = admin.list_group_offsets({settings.app_id: tps}).get(
                    settings.app_id, {})
            except KafkaError:  # e.g. the group coordinator is still loading: ask again
                committed = {}
            if all(committed.get(tp) is not None and committed[tp].offset >= end[tp]
                   for tp in tps if end[tp] > 0):
                return True
            time.sleep(poll_seconds)
        return False
    finally:
        consumer.close()
        admin.close()


def read_all(settings: Settings, topics: list[str]) -> dict[str, list[Any]]:
    """Every record of ``topics`` up to their current end, JSON-decoded, per topic (records of
    one key keep their order)."""
    return {t: [value for _key, value in read_topic(settings, t)] for t in topics}


def changelog_topic(settings: Settings, table: str = "gangs") -> str:
    """Faust's changelog topic of a table: ``<app id>-<table>-changelog``."""
    return f"{settings.app_id}-{table}-changelog"


def read_table(settings: Settings, table: str = "gangs") -> dict[str, Any]:
    """Read a table's changelog from the beginning and return the last value per key (keys
    whose last value is a tombstone are left out); values are the JSON stored by the worker."""
    latest: dict[str, Any] = {}
    for key, value in read_topic(settings, changelog_topic(settings, table)):
        if key is None:
            continue
        if key.startswith('"'):
            key = json.loads(key)  # Faust serialises table keys as JSON strings
        if value is None or value == "":
            latest.pop(key, None)
        else:
            latest[key] = value
    return latest


def wait_group_stable(bootstrap: str, group_id: str, timeout_seconds: float,
                      alive: Callable[[], bool] = lambda: True,
                      poll_seconds: float = 0.25,
                      security: KafkaSecurity | None = None,
                      members: int | None = None) -> bool:
    """Wait until consumer group ``group_id`` is ``Stable`` with at least one member (a worker
    has joined and been assigned its partitions), or with exactly ``members`` members when
    given. Returns ``False`` on timeout or when ``alive()`` turns false. ``security``: how to
    connect (``None``: PLAINTEXT)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="gangstate-tap",
                             **(security or KafkaSecurity()).kafka_python())
    try:
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline and alive():
            try:
                group = admin.describe_groups([group_id]).get(group_id) or {}
            except KafkaError:  # coordinator still loading: ask again
                group = {}
            state = str(group.get("group_state") or group.get("state") or "")
            joined = len(group.get("members") or [])
            if state.lower() == "stable" and (joined == members if members is not None
                                              else joined > 0):
                return True
            time.sleep(poll_seconds)
        return False
    finally:
        admin.close()


def partition_clocks(settings: Settings, topic: str | None = None,
                     depth: int = 16, timeout_seconds: float = 10.0,
                     ) -> dict[int, int | None]:
    """The event time each partition of ``topic`` (default ``gang-events``) has reached: the
    latest ``observed_at`` among its last ``depth`` records (microseconds; ``None`` for an
    empty partition, or one whose last records carry no readable ``observed_at``). A worker
    folding that partition moves its clock there once it has caught up (a partition's clock
    only moves forward). Cheap: one short read per partition, no consumer group. An absent
    topic gives ``{}``; a partition not read within ``timeout_seconds`` keeps what was read
    of it (``None`` if nothing). Raises ``kafka.errors.KafkaError`` when the broker cannot be
    reached."""
    assert settings.bootstrap, "KAFKA_BOOTSTRAP_SERVERS is not set"
    from streams.wire.contracts import parse_time

    topic = topic or settings.topics.gang_events
    consumer = KafkaConsumer(**settings.kafka_python(
        enable_auto_commit=False, group_id=None, consumer_timeout_ms=1000))
    try:
        tps = [TopicPartition(topic, p)
               for p in sorted(consumer.partitions_for_topic(topic) or set())]
        if not tps:
            return {}
        consumer.assign(tps)
        end = consumer.end_offsets(tps)
        start = consumer.beginning_offsets(tps)
        clocks: dict[int, int | None] = {tp.partition: None for tp in tps}
        pending = {tp for tp in tps if end[tp] > start[tp]}
        for tp in pending:
            consumer.seek(tp, max(start[tp], end[tp] - depth))
        deadline = time.monotonic() + timeout_seconds
        while pending and time.monotonic() < deadline:
            polled = consumer.poll(timeout_ms=500)
            for tp, messages in polled.items():
                for msg in messages:
                    try:
                        at = parse_time(json.loads(msg.value)["observed_at"])
                    except (AttributeError, TypeError, ValueError, KeyError):
                        continue  # a tombstone, not JSON, no or a bad observed_at
                    known = clocks[tp.partition]
                    if known is None or at > known:
                        clocks[tp.partition] = at
                if consumer.position(tp) >= end[tp]:
                    pending.discard(tp)
                    consumer.pause(tp)
        return clocks
    finally:
        consumer.close()


def record_counts(settings: Settings, topics: list[str]) -> dict[str, int]:
    """How many records each of ``topics`` holds now: end minus beginning offsets, summed over
    its partitions (0 for an absent topic). Reads no record. Raises
    ``kafka.errors.KafkaError`` when the broker cannot be reached."""
    assert settings.bootstrap, "KAFKA_BOOTSTRAP_SERVERS is not set"
    consumer = KafkaConsumer(**settings.kafka_python(group_id=None))
    try:
        counts: dict[str, int] = {}
        for topic in topics:
            tps = [TopicPartition(topic, p)
                   for p in sorted(consumer.partitions_for_topic(topic) or set())]
            end = consumer.end_offsets(tps) if tps else {}
            start = consumer.beginning_offsets(tps) if tps else {}
            counts[topic] = sum(end[tp] - start[tp] for tp in tps)
        return counts
    finally:
        consumer.close()
