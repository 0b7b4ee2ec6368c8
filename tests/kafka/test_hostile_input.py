"""Hostile or oddly shaped input through the real worker (issue 15, docs/contracts.md "Limits"):

- a record, or a keyless tick, whose ``observed_at`` is far ahead of its Kafka timestamp
  (2099) is dead-lettered: it fires no timer of its partition early and does not move the
  partition's clock into the future;
- a record whose Kafka key is not its gang (another key, no key, or the gang's key on another
  partition than murmur2 gives) is re-published under its gang's key to its gang's partition:
  one gang, one state, never split;
- a null value (a Kafka tombstone) is an invalid record, dead-lettered with its reason and no
  traceback;
- a value over the size bound (6 MiB on a topic whose limit was raised), or a large invalid
  value (about 1 MB), is dead-lettered with its size, sha256 and head only: the dead letter fits
  the broker's default limit, the worker keeps going and folds what follows.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType

from streams.core.state import from_wire
from streams.core.timefmt import format_time
from streams.kafka.partitions import partition_of
from streams.kafka.reading import read_table, wait_caught_up
from streams.settings import Settings
from tests.doubles.apiserver import eventually
from tests.fixtures.builders import kube_pod, pod_line
from tests.fixtures.throughkafka import WorkerRun, worker_run

pytestmark = pytest.mark.kafka

FUTURE = "2099-01-01T00:00:00.000000Z"


def pod(at: int, ns: str, gang: str, name: str, uid: str, min_available: int,
        rv: str = "1") -> bytes:
    """A ``gangstate.kube/v1`` ADDED of a Pending gang member (annotation gang)."""
    return json.dumps(pod_line(kube_pod(name, ns, uid=uid, rv=rv, gang=gang,
                                        min_available=min_available),
                               format_time(at))).encode()


def tick(at: int | str) -> bytes:
    text = at if isinstance(at, str) else format_time(at)
    return json.dumps({"schema": "gangstate.tick/v1", "observed_at": text}).encode()


def producer(settings: Settings, **extra) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=settings.bootstrap, acks="all", **extra)


def send_and_read(s: Settings, run: WorkerRun, gang: str, values: list[bytes | None],
                  timeout: float, **extra: Any
                  ) -> tuple[bool, bool, str, list[dict[str, Any]], dict[str, Any]]:
    """Send ``values`` (``None``: a tombstone) to gang-events under ``gang``'s key, in order
    (``extra``: the producer's options), wait up to ``timeout`` seconds for the worker to catch
    up, then: whether it did, whether the worker is alive, its log, the dead letters and the
    gang table."""
    p = producer(s, **extra)
    for value in values:
        p.send(s.topics.gang_events, key=gang.encode(), value=value)
    p.flush()
    p.close()
    caught_up = wait_caught_up(s, timeout, alive=run.alive)
    alive = run.alive()
    assert run.log_path is not None
    worker_log = run.log_path.read_text(errors="replace")
    dead = run.read(s.topics.dead_letters)[s.topics.dead_letters]
    return caught_up, alive, worker_log, dead, read_table(s)


def changelog_partitions(settings: Settings) -> dict[str, set[int]]:
    """Key -> the changelog partitions of the gang table it was written to."""
    from kafka import KafkaConsumer, TopicPartition

    from streams.kafka.reading import changelog_topic

    topic = changelog_topic(settings)
    consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None,
                             enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        out: dict[str, set[int]] = {}
        while any(consumer.position(tp) < end[tp] for tp in tps):
            for tp, records in consumer.poll(timeout_ms=1000).items():
                for r in records:
                    out.setdefault(r.key.decode(), set()).add(tp.partition)
        return out
    finally:
        consumer.close()


def members_in_table(settings: Settings, gang: str) -> list[str]:
    """The member names of ``gang`` in the worker's table as its changelog has it now."""
    table = read_table(settings)
    return [m.name for m in from_wire(table[gang]).members.values()] if gang in table else []


def same_partition(gang: str, partitions: int, ns: str) -> str:
    """Another gang id of namespace ``ns`` on the partition of ``gang``."""
    want = partition_of(gang, partitions)
    for n in range(10_000):
        other = f"{ns}/other-{n}"
        if partition_of(other, partitions) == want:
            return other
    raise AssertionError("no gang id found")


def test_a_record_far_ahead_of_its_kafka_timestamp_fires_no_timer_and_moves_no_clock(
        kafka_settings: Settings, tmp_path: Path) -> None:
    s = kafka_settings
    topic = s.topics.gang_events
    gang, partition = "sk/g", partition_of("sk/g", s.partitions)
    other = same_partition(gang, s.partitions, "sk")
    now = int(time.time()) * 1_000_000
    with worker_run(s, tmp_path / "worker.log") as run:
        p = producer(s)
        # sk/g: 1 of minMember 2, held from `now`: its warning is due at now + 10 s
        p.send(topic, key=gang.encode(), value=pod(now, "sk", "g", "g-0", "u-g-0", 2))
        # a record of the gang and a keyless tick on its partition, both in 2099
        far = json.loads(pod(now, "sk", "g", "g-9", "u-g-9", 2))
        far["observed_at"] = FUTURE
        p.send(topic, key=gang.encode(), value=json.dumps(far).encode())
        p.send(topic, key=None, value=tick(FUTURE), partition=partition)
        p.flush()
        # a tick 50 minutes ahead whose producer says it was sent then (the broker accepts
        # producer timestamps up to an hour ahead): the topic keeps the broker's own time
        later = now + 3000 * 1_000_000
        p.send(topic, key=None, value=tick(later), partition=partition,
               timestamp_ms=later // 1000)
        # another gang of the same partition, 1 of 2, at `now`
        name = other.split("/")[1]
        p.send(topic, key=other.encode(), value=pod(now, "sk", name, f"{name}-0", "u-o-0", 2))
        p.flush()
        run.caught_up(60)
        early = run.read(s.topics.diagnostics, s.topics.dead_letters)
        # an honest tick 11 s later: both warnings are due now, with their own due time
        p.send(topic, key=None, value=tick(now + 11_000_000), partition=partition)
        p.flush()
        p.close()
        run.caught_up(60)
        got = run.read(s.topics.diagnostics)
    assert early[s.topics.diagnostics] == [], "a 2099 record fired timers early"
    dead = early[s.topics.dead_letters]
    assert len(dead) == 3
    assert all("ahead of its Kafka timestamp" in d["error"] for d in dead), dead
    assert sorted((d["key"] or "", json.loads(d["value"])["schema"],
                   json.loads(d["value"])["observed_at"]) for d in dead) == [
        ("", "gangstate.tick/v1", format_time(later)), ("", "gangstate.tick/v1", FUTURE),
        (gang, "gangstate.kube/v1", FUTURE)]  # dead letters of no key land anywhere
    warned = {(d["gang"], d["reason"], d["observed_at"]) for d in got[s.topics.diagnostics]}
    assert warned == {(gang, "GangMembersInsufficient", format_time(now + 10_000_000)),
                      (other, "GangMembersInsufficient", format_time(now + 10_000_000))}


def test_records_keyed_elsewhere_are_rekeyed_to_their_gang_never_split(
        kafka_settings: Settings, tmp_path: Path) -> None:
    s = kafka_settings
    topic = s.topics.gang_events
    gang = "rk/g"
    right = partition_of(gang, s.partitions)
    wrong_key = next(k for k in (f"rk/x{n}" for n in range(100))
                     if partition_of(k, s.partitions) != right)
    wrong_partition = (right + 1) % s.partitions
    now = int(time.time()) * 1_000_000
    with worker_run(s, tmp_path / "worker.log") as run:
        p = producer(s)
        p.send(topic, key=gang.encode(), value=pod(now, "rk", "g", "g-0", "u-0", 4))
        p.send(topic, key=wrong_key.encode(), value=pod(now + 1, "rk", "g", "g-1", "u-1", 4))
        p.send(topic, key=None, value=pod(now + 2, "rk", "g", "g-2", "u-2", 4),
               partition=wrong_partition)
        p.send(topic, key=gang.encode(), value=pod(now + 3, "rk", "g", "g-3", "u-3", 4),
               partition=wrong_partition)  # the gang's key, another partitioner
        p.flush()
        p.close()
        run.caught_up(60)
        # re-published records are folded after a second round: wait for the four members
        eventually(lambda: len(members_in_table(s, gang)) == 4, timeout=60, interval=0.2)
        run.caught_up(60)
        worker_log = (tmp_path / "worker.log").read_text(errors="replace")
        table = read_table(s)
        written = changelog_partitions(s)
        dead = run.read(s.topics.dead_letters)[s.topics.dead_letters]
    assert dead == []
    assert written == {gang: {right}}, "the gang's state was split across partitions"
    assert sorted(table) == [gang], worker_log[-2000:]
    state = from_wire(table[gang])
    assert sorted(m.name for m in state.members.values()) == ["g-0", "g-1", "g-2", "g-3"]


def test_values_over_the_bound_are_dead_lettered_with_digest_size_and_head(
        kafka_settings: Settings, tmp_path: Path) -> None:
    s = kafka_settings
    topic = s.topics.gang_events
    limit = 8 * 1024 * 1024
    admin = KafkaAdminClient(bootstrap_servers=s.bootstrap)
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                        configs={"max.message.bytes": str(limit)})])
    admin.close()
    gang = "big/g"
    now = int(time.time()) * 1_000_000
    huge = b'{"schema":"gangstate.nope/v1","pad":"' + b"x" * (6 * 1024 * 1024) + b'"}'
    large = b'{"schema":"gangstate.cycle/v1","pad":"' + b"y" * 1_000_000 + b'"}'
    with worker_run(s, tmp_path / "worker.log") as run:
        caught_up, alive, worker_log, dead, table = send_and_read(
            s, run, gang, [huge, large, pod(now, "big", "g", "g-0", "u-0", 1)], 90,
            max_request_size=limit)
    assert caught_up and alive, worker_log[-3000:]
    assert [d["value_size"] for d in dead] == [len(huge), len(large)]
    assert [d["value_sha256"] for d in dead] == [hashlib.sha256(huge).hexdigest(),
                                                 hashlib.sha256(large).hexdigest()]
    assert all(d["value_truncated"] for d in dead)
    # 4,096 bytes as written: the 7 quotes of each head take 2 bytes each (\\")
    assert dead[0]["value"] == huge[:4089].decode()
    assert dead[1]["value"] == large[:4089].decode()
    assert "over the 1048576-byte bound" in dead[0]["error"]
    assert dead[1]["error"].startswith("invalid record")
    assert all(len(json.dumps(d, separators=(",", ":")).encode()) <= 8192 for d in dead)
    assert sorted(table) == [gang]  # what followed was folded


def test_a_null_value_is_dead_lettered_as_an_invalid_record_without_a_traceback(
        kafka_settings: Settings, tmp_path: Path) -> None:
    # a tombstone (value None) used to be dead-lettered as "internal error: TypeError: object
    # of type 'NoneType' has no len()", with the traceback in the worker's log
    s = kafka_settings
    gang = "nil/g"
    now = int(time.time()) * 1_000_000
    with worker_run(s, tmp_path / "worker.log") as run:
        caught_up, alive, worker_log, dead, table = send_and_read(
            s, run, gang, [None, pod(now, "nil", "g", "g-0", "u-0", 1)], 60)
    assert caught_up and alive, worker_log[-3000:]
    assert [(d["key"], d["error"], d["value"], d["value_size"]) for d in dead] == [
        (gang, "invalid record: null value (tombstone)", "", 0)]
    assert "Traceback" not in worker_log and "internal error" not in worker_log, worker_log
    assert sorted(table) == [gang]  # what followed was folded


def test_a_gone_gang_leaves_the_table_with_a_changelog_tombstone(
        kafka_settings: Settings, tmp_path: Path) -> None:
    s = kafka_settings
    topic = s.topics.gang_events
    gone, kept = "rm/gone", same_partition("rm/gone", s.partitions, "rm")
    partition = partition_of(gone, s.partitions)
    t = (int(time.time()) - 3600) * 1_000_000  # an hour ago: records behind Kafka's clock
    with worker_run(s, tmp_path / "worker.log") as run:
        p = producer(s)
        for gang in (gone, kept):
            ns, name = gang.split("/")
            p.send(topic, key=gang.encode(), value=pod(t, ns, name, f"{name}-0", f"u-{name}", 1))
        ns, name = gone.split("/")
        deleted = json.loads(pod(t + 10_000_000, ns, name, f"{name}-0", f"u-{name}", 1, "2"))
        deleted["type"] = "DELETED"
        p.send(topic, key=gone.encode(), value=json.dumps(deleted).encode())
        # 600 s after the deletion (the deleted-uid memory window) the gang is gone
        p.send(topic, key=None, value=tick(t + 609_000_000), partition=partition)
        p.flush()
        run.caught_up(60)
        before = read_table(s)
        p.send(topic, key=None, value=tick(t + 610_000_000), partition=partition)
        p.flush()
        p.close()
        run.caught_up(60)
        # the tombstone is written at the next offset commit: wait until the gang is gone
        eventually(lambda: gone not in read_table(s), timeout=60, interval=0.2)
        after = read_table(s)
        written = changelog_partitions(s)
    assert from_wire(before[gone]).phase == "Deleted" and sorted(before) == sorted([gone, kept])
    assert sorted(after) == [kept]  # the last changelog record of the gone gang is a tombstone
    assert written[gone] == {partition}


def test_topics_are_created_with_the_broker_clock_and_a_dead_letter_retention(
        kafka_settings: Settings) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=kafka_settings.bootstrap)
    try:
        t = kafka_settings.topics
        described = admin.describe_configs([
            ConfigResource(ConfigResourceType.TOPIC, t.gang_events),
            ConfigResource(ConfigResourceType.TOPIC, t.dead_letters)])
    finally:
        admin.close()
    configs = {name: {key: data["value"] if isinstance(data, dict) else data
                      for key, data in entries.items()}
               for by_name in described.values() for name, entries in by_name.items()}
    assert configs[t.gang_events]["message.timestamp.type"] == "LogAppendTime"
    assert configs[t.dead_letters]["retention.ms"] == str(7 * 24 * 3600 * 1000)
