"""A worker restart in the middle of a replay: the gang table is recovered from its changelog,
timers are rebuilt from it, and the outputs (after dropping repeats by id, as consumers do
under at-least-once delivery) equal the offline fold of the whole log."""

from __future__ import annotations

import pytest

from producers.replay import merged_by_time, replay
from streams.wire.contracts import parse_time
from streams.core.state import from_wire, summary
from streams.wire.traces import fold_lines
from streams.kafka.reading import read_all, read_table, wait_caught_up
from streams.dev.worker_process import running_worker
from tests.fixtures.casecheck import handed_case_dirs

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
    with running_worker(kafka_settings, log_path=tmp_path / "first.log") as worker:
        replay(lines[:half], kafka_settings)
        assert wait_caught_up(kafka_settings, 120, alive=lambda: worker.poll() is None)
    with running_worker(kafka_settings, log_path=tmp_path / "second.log") as worker:
        replay(lines[half:], kafka_settings, at=AT)
        assert wait_caught_up(kafka_settings, 120, alive=lambda: worker.poll() is None), \
            (tmp_path / "second.log").read_text()[-2000:]
        t = kafka_settings.topics
        got = read_all(kafka_settings, [t.diagnostics, t.commands])
        table = read_table(kafka_settings)
    expected = fold_lines(((n, raw) for _, n, raw in lines), AT)
    assert first_seen(got[t.diagnostics], "gang") == first_seen(expected.diagnostics, "gang")
    assert first_seen(got[t.commands], "gang_group") == first_seen(expected.commands,
                                                                    "gang_group")
    assert {g: summary(from_wire(v)) for g, v in table.items()} == \
        {g: summary(s) for g, s in expected.states.items()}
