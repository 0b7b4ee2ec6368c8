"""Worker start-up on an existing table: the bulk changelog load, the timer hint in stored
values, records waiting in gang-events while the table recovers, and Faust's flow control
(``streams.worker.app``)."""

from __future__ import annotations

import asyncio
import json

import pytest
from mode.utils.queues import FlowControlQueue

from producers.replay import merged_by_time, replay
from streams.kafka.partitions import partition_of
from streams.worker.app import create_app
from streams.worker.faust_patches import FlowControl
from streams.worker.table import NO_TIMER, BulkRecoveryStore, encode_state, legacy_key
from streams.wire.contracts import parse_time
from streams.core.fold import FoldSettings, PartitionFold, next_due
from streams.core.state import from_wire, summary
from tests.fixtures.casecheck import handed_case_dirs
from tests.fixtures.throughkafka import offline, worker_run

AT = parse_time("2026-11-29T00:00:00Z")


def test_resume_of_a_running_flow_keeps_the_queued_records():
    """Faust calls ``flow_control.resume()`` again at the end of a recovery, after the stream
    partitions are already fetching; that call must not drop what they queued."""

    async def run() -> None:
        flow = FlowControl()
        queue: FlowControlQueue = FlowControlQueue(flow_control=flow, clear_on_resume=True)
        queue.put_nowait("stale")
        flow.resume()  # suspended -> running: records of the old assignment go
        assert queue.qsize() == 0
        queue.put_nowait("fresh")
        flow.resume()  # already running: keep
        assert queue.qsize() == 1
        flow.suspend()
        flow.resume()
        assert queue.qsize() == 0

    asyncio.run(run())


def test_stored_value_says_whether_the_gang_has_a_timer():
    store: dict = {}
    fold = PartitionFold(store)
    lines = merged_by_time([case / "trace.jsonl" for case in handed_case_dirs()])
    from streams.wire.decoding import decode_input

    seen = {True: 0, False: 0}
    for _, _n, raw in lines:
        d = decode_input(raw)
        if d.record is None:
            continue
        fold.feed(d.key, d.record)
        for state in store.values():
            has = next_due(state, FoldSettings()) is not None
            value = encode_state(state, has)
            assert value.startswith(NO_TIMER) is not has
            assert from_wire(json.loads(value)) == state
            seen[has] += 1
    assert seen[True] and seen[False]


def test_legacy_json_keys_read_as_gang_ids():
    assert legacy_key(b'"team-a/llm"') == b"team-a/llm"
    assert legacy_key(b'"broken') == b'"broken'


@pytest.mark.kafka
def test_bulk_load_reads_the_active_changelog_partitions(kafka_settings):
    """The store loads the last value per key (legacy JSON keys as gang ids, tombstones
    remove) and reports the last offset read, so Faust's recovery has nothing left."""
    from kafka import KafkaProducer

    from streams.kafka.reading import changelog_topic

    app = create_app(kafka_settings)
    store = app.gangstate_store.table.data
    assert isinstance(store, BulkRecoveryStore)
    topic = changelog_topic(kafka_settings)
    gang = "team-a/llm"
    p = partition_of(gang, kafka_settings.partitions)
    producer = KafkaProducer(bootstrap_servers=kafka_settings.bootstrap)
    for key, value in [(b'"team-a/llm"', b'{"old":1}'), (b"team-a/llm", b'{"new":1}'),
                       (b"team-a/gone", b"{}"), (b"team-a/gone", None)]:
        producer.send(topic, key=key, value=value, partition=p)
    producer.send(topic, key=b"team-b/other", value=b"{}", partition=(p + 1) % 8)
    producer.flush()
    producer.close()
    from faust.types import TP

    loaded = asyncio.run(store._load([TP(topic, p), TP(topic, (p + 2) % 8)]))
    assert dict(store.data) == {b"team-a/llm": b'{"new":1}'}
    assert loaded == {TP(topic, p): 3}
    assert list(store.partition_items(p)) == [(b"team-a/llm", b'{"new":1}')]


@pytest.mark.kafka
def test_restart_with_a_backlog_recovers_and_serves_every_partition(kafka_settings,
                                                                    tmp_path):
    """The second half of the log is published while no worker runs, so every partition has
    records waiting when the next worker recovers the table: all of them are folded, and the
    outputs and table equal the offline fold of the whole log."""
    lines = merged_by_time([case / "trace.jsonl" for case in handed_case_dirs()])
    half = len(lines) // 2
    with worker_run(kafka_settings, tmp_path / "first.log") as run:
        run.replay(lines[:half])
        run.caught_up()
    replay(lines[half:], kafka_settings, at=AT)
    with worker_run(kafka_settings, tmp_path / "second.log") as run:
        run.caught_up()
        t = kafka_settings.topics
        got = run.read(t.diagnostics, t.commands)
        table = run.table()
    expected = offline(lines, AT)
    ids = {rec["id"] for rec in got[t.diagnostics]}
    assert ids == {rec["id"] for rec in expected.diagnostics}
    assert {rec["id"] for rec in got[t.commands]} == {rec["id"] for rec in expected.commands}
    assert {g: summary(from_wire(v)) for g, v in table.items()} == \
        {g: summary(s) for g, s in expected.states.items()}
