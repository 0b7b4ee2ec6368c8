"""A worker restart in the middle of a replay: the gang table is recovered from its changelog,
timers are rebuilt from it, and the outputs (after dropping repeats by id, as consumers do
under at-least-once delivery) equal the offline fold of the whole log."""

from __future__ import annotations

import pytest

from producers.replay import merged_by_time
from streams.wire.contracts import parse_time
from streams.core.state import from_wire, summary
from tests.fixtures.casecheck import handed_case_dirs
from tests.fixtures.throughkafka import offline, worker_run

pytestmark = pytest.mark.kafka
AT = parse_time("2026-11-29T00:00:00Z")


def first_seen(records: list[dict], key: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for rec in records:
        ids = out.setdefault(rec[key], [])
        if rec["id"] not in ids:
            ids.append(rec["id"])
    return out


def test_restart_mid_replay_recovers_state_and_timers(kafka_settings, tmp_path):
    lines = merged_by_time([case / "trace.jsonl" for case in handed_case_dirs()])
    half = len(lines) // 2
    with worker_run(kafka_settings, tmp_path / "first.log") as run:
        run.replay(lines[:half])
        run.caught_up()
    with worker_run(kafka_settings, tmp_path / "second.log") as run:
        run.replay(lines[half:], at=AT)
        run.caught_up()
        t = kafka_settings.topics
        got = run.read(t.diagnostics, t.commands)
        table = run.table()
    expected = offline(lines, AT)
    assert first_seen(got[t.diagnostics], "gang") == first_seen(expected.diagnostics, "gang")
    assert first_seen(got[t.commands], "gang_group") == first_seen(expected.commands,
                                                                    "gang_group")
    assert {g: summary(from_wire(v)) for g, v in table.items()} == \
        {g: summary(s) for g, s in expected.states.items()}
