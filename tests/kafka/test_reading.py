"""Reading a topic up to its end while it keeps growing (``streams.kafka.reading.read_topic``), on
the real broker: a scheduler's storm never leaves the topic idle, and a read without ``follow``
must stop at the end offsets it saw when it started (``gangstate tap`` without ``--follow``,
``read_all``, ``bench/holds.py``'s rounds)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from kafka import KafkaProducer

from streams.kafka.reading import read_all, read_topic
from streams.settings import Settings

pytestmark = pytest.mark.kafka


def producer(settings: Settings) -> Any:
    return KafkaProducer(**settings.kafka_python(), key_serializer=str.encode,
                         value_serializer=lambda v: None if v is None else json.dumps(v).encode())


def test_a_read_stops_at_the_ends_it_saw_while_records_keep_arriving(
        kafka_settings: Settings) -> None:
    """40 records on 8 partitions (keys g-0 .. g-7), the last of g-3 a tombstone; then a thread
    sends a record every 5 ms until the read returned. The read yields the 40 (and at most
    what was sent before it took its end offsets) and returns while the thread still sends."""
    topic = kafka_settings.topics.gang_events
    p = producer(kafka_settings)
    first = [(f"g-{i % 8}", {"n": i}) for i in range(40)]
    first[-5] = ("g-3", None)
    for key, value in first:
        p.send(topic, key=key, value=value)
    p.flush()
    done, sent_after = threading.Event(), []

    def storm() -> None:
        n = 1000
        while not done.is_set() and n < 1000 + 12_000:  # at most a minute of it
            p.send(topic, key=f"g-{n % 8}", value={"n": n})
            sent_after.append(n)
            n += 1
            done.wait(0.005)
        p.flush()

    thread = threading.Thread(target=storm, daemon=True)
    thread.start()
    try:
        got = list(read_topic(kafka_settings, topic))
        still_sending, sent_by_then = thread.is_alive() and not done.is_set(), len(sent_after)
    finally:
        done.set()
        thread.join(30)
        p.close()
    # it returned during the storm (a read that waits for an idle topic returns after it)
    assert still_sending
    # every record of before, in order per key, then at most what was sent by then (the storm
    # started before the read took its end offsets)
    by_key: dict[str | None, list[Any]] = {}
    for key, value in got:
        by_key.setdefault(key, []).append(value)
    for key in {k for k, _ in first}:
        want = [v for k, v in first if k == key]
        assert by_key[key][:len(want)] == want
        assert all(v is not None and v["n"] >= 1000 for v in by_key[key][len(want):])
    assert 40 <= len(got) <= 40 + sent_by_then
    # the records sent meanwhile are there for the next read
    assert len(read_all(kafka_settings, [topic])[topic]) == 40 + len(sent_after)


def test_tap_shows_one_clusters_records(kafka_settings: Settings) -> None:
    """``gangstate tap diagnostics --cluster eu-1``: of a record of eu-1, one of us-2 and one
    naming no cluster (default's), only eu-1's; ``--cluster default`` only the last; without
    ``--cluster`` all three."""
    from streams.kafka.reading import tap

    topic = kafka_settings.topics.diagnostics
    p = producer(kafka_settings)
    records = [("eu-1:ns/g", {"n": 1, "cluster": "eu-1"}), ("us-2:ns/g", {"n": 2, "cluster": "us-2"}),
               ("ns/g", {"n": 3})]
    for key, value in records:
        p.send(topic, key=key, value=value)
    p.flush()
    p.close()

    def shown(cluster: str | None) -> list[int]:
        lines: list[str] = []
        tap(kafka_settings, topic, from_beginning=True, follow=False, write=lines.append,
            cluster=cluster)
        return sorted(json.loads(line)["n"] for line in lines)

    assert shown("eu-1") == [1]
    assert shown("default") == [3]
    assert shown(None) == [1, 2, 3]
