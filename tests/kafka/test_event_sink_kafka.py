"""The Event sink end to end: a replay of the handed cases through real Kafka, the worker and
the sink, into the TEST API SERVER double (moved from ``tests/unit/test_event_sink.py``, whose
helpers it uses)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from streams.events.recorder import ANNOTATION_LAST_ID
from streams.events.sink import consume, group_id
from streams.settings import Settings, Topics
from tests.doubles.apiserver import ApiServerDouble, eventually
from tests.fixtures.throughkafka import worker_run
from tests.unit.test_event_sink import (AT, CASES, EXPECTED, make_sink, server, summary,
                                        writes)

__all__ = ["server"]  # the fixture, from the unit tests


@pytest.mark.kafka
def test_replay_through_kafka_worker_and_sink(kafka_bootstrap: str, server: ApiServerDouble,
                                              tmp_path: Path) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

    from streams.kafka.publishing import Publisher, ensure_topics
    from producers.replay import merged_by_time

    run = uuid.uuid4().hex[:10]
    settings = Settings(bootstrap=kafka_bootstrap, topics=Topics(f"sink-{run}."),
                        app_id=f"gangstate-sink-{run}")
    ensure_topics(settings)
    lines = merged_by_time([CASES / case / "trace.jsonl" for case in sorted(EXPECTED)])
    sink = make_sink(server)
    stop = threading.Event()
    thread = threading.Thread(target=consume, args=(settings, sink, stop), daemon=True)
    log = tmp_path / "worker.log"
    with worker_run(settings, log) as worker:
        thread.start()
        pub = Publisher(settings)
        worker.replay(lines, at=AT, publisher=pub)
        pub.close()
        worker.caught_up(90)
    topic = settings.topics.diagnostics
    probe = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=None)
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(probe.partitions_for_topic(topic))]
        end = probe.end_offsets(tps)

        def committed() -> bool:
            got = admin.list_group_offsets({group_id(settings): tps}).get(
                group_id(settings), {})
            return all(got.get(tp) is not None and got[tp].offset >= end[tp]
                       for tp in tps if end[tp])
        eventually(committed, timeout=30, interval=0.2)
    finally:
        stop.set()
        thread.join(10)
        probe.close()
        admin.close()
    assert sum(end.values()) == 10  # 2 + 4 + 2 + 2 diagnostics of the cases
    expected = sorted(row for _, rows in EXPECTED.values() for row in rows)
    assert summary(server.objects("events")) == expected
    assert writes(server) == (20, 3)
    assert all(e["metadata"]["annotations"][ANNOTATION_LAST_ID].count("#") == 2
               for e in server.objects("events"))
