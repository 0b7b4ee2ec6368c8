"""The real pipeline: replay -> Kafka -> Faust worker -> diagnostics/commands/gang table.

All handed cases are replayed, merged by event time, into one set of topics served by one
worker process; each case's expectations are then checked on what the worker wrote, and the
outputs are compared with the offline fold of the same log (identical per gang, in order).
"""

from __future__ import annotations

import json

import pytest

from streams.kafka.publishing import Publisher
from streams.settings import Settings
from streams.wire.contracts import parse_time
from streams.core.state import from_wire, summary
from tests.fixtures.casecheck import case_dirs, problems
from tests.fixtures.throughkafka import (fresh_settings, offline, with_gated_representative,
                                         worker_run)

pytestmark = pytest.mark.kafka
AT = parse_time("2026-12-02T13:55:00Z")
"""After every case, the recorded ones (the last record at 2026-12-02T13:50) included, with
their timers (stranded: 120 s) due; not ahead of the wall clock, as the worker sets aside a tick
more than 60 s ahead of its Kafka timestamp."""


def by_key(records: list[dict], key: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for rec in records:
        out.setdefault(rec[key], []).append(json.dumps(rec, sort_keys=True))
    return out


@pytest.fixture(scope="module")
def pipeline_run(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory):
    """One replay of every case through one worker; yields what came out and the offline
    fold of the same log."""
    settings = fresh_settings(kafka_bootstrap, "pipeline")
    # the handed cases and the shim's gated representative (team-g/g: the one command)
    lines = with_gated_representative(case_dirs(), tmp_path_factory.mktemp("trace"))
    bad = [("malformed", 1, b'{"schema": "gangstate.cycle/v1", "observed_at": "yesterday"}'),
           ("malformed", 2, b"not json at all")]
    expected = offline(lines, AT)
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    with worker_run(settings, log) as run:
        # Malformed records go in first: the worker must dead-letter them and carry on.
        pub = Publisher(settings)
        for _, _, raw in bad:
            pub.send(settings.topics.gang_events, "team-a/llm-pretrain", raw)
        pub.flush()
        report = run.replay(lines, at=AT, publisher=pub)
        pub.close()
        run.caught_up()
        got = run.read()
        table = run.table()
    return {"settings": settings, "report": report, "expected": expected, "got": got,
            "table": table}


@pytest.mark.parametrize("case", case_dirs(), ids=lambda p: p.name)
def test_case_through_kafka(pipeline_run, case) -> None:
    t = pipeline_run["settings"].topics
    got = pipeline_run["got"]
    gangs = {gang: summary(from_wire(value)) for gang, value in pipeline_run["table"].items()}
    assert problems(case, got[t.diagnostics], got[t.commands], gangs) == []


def test_kafka_outputs_equal_the_offline_fold(pipeline_run) -> None:
    t = pipeline_run["settings"].topics
    got, expected = pipeline_run["got"], pipeline_run["expected"]
    assert by_key(got[t.diagnostics], "gang") == by_key(expected.diagnostics, "gang")
    assert by_key(got[t.commands], "gang_group") == by_key(expected.commands, "gang_group")
    # 10 of the handed cases and team-g/g, 46 of the recorded ones (tests/cases/recorded; 2
    # of them GangMembersLost of the once-satisfied-replacement cases; 13 of the gangs that
    # live: 1 job-runs-and-succeeds, 3 member-lost-then-restored, 3 job-pods-fail-and-are-
    # recreated (one GangScheduled: failed members are not counted as bound), 2 preemption-in-progress, 1 each of preemption-wasted, heterogeneous-gang,
    # selector-no-node-matches and nonstrict-member-does-not-fit; 1 network-topology-
    # unavailable)
    assert len(got[t.diagnostics]) == len(expected.diagnostics) == 56
    # the gated representatives' switches, and the hold of the recorded shim case sh-gpu/g
    # (3 x 1 GPU on 2 GPUs: held once its episode settled, released when its pods were deleted)
    assert sorted((c["gang_group"], c["type"], c["reason"]) for c in got[t.commands]) == [
        ("sh-gated-3/g", "SwitchRepresentative", "RepresentativeGated"),
        ("sh-gpu/g", "HoldGang", "GangCannotFit"), ("sh-gpu/g", "ReleaseGang", "SpecChanged"),
        ("team-g/g", "SwitchRepresentative", "RepresentativeGated")]


def test_gang_table_equals_the_offline_state(pipeline_run) -> None:
    table = pipeline_run["table"]
    expected = pipeline_run["expected"].states
    assert sorted(table) == sorted(expected)
    for gang, state in expected.items():
        assert summary(from_wire(table[gang])) == summary(state)


def test_malformed_records_are_dead_lettered_with_the_reason(pipeline_run) -> None:
    t = pipeline_run["settings"].topics
    dead = pipeline_run["got"][t.dead_letters]
    assert [d["value"] for d in dead] == [
        '{"schema": "gangstate.cycle/v1", "observed_at": "yesterday"}', "not json at all"]
    assert all(d["schema"] == "gangstate.dead-letter/v1" and d["key"] == "team-a/llm-pretrain"
               and d["topic"] == t.gang_events and d["error"].startswith("invalid record")
               for d in dead)
    assert "observed_at" in dead[0]["error"]


def test_replay_published_every_record(pipeline_run) -> None:
    report = pipeline_run["report"]
    # 22 of the handed cases, 4 of team-g/g, 8189 of the recorded ones (4310 of them the lines
    # of the 8 cases of gangs that live: 23 + 35 + 64 + 1411 + 216 + 980 + 1518 + 63; 31 of
    # network-topology-unavailable)
    assert report.published == 8215 and report.ticks == 8
    assert not report.malformed and not report.dropped


def test_the_wait_for_kafka_probe_accepts_its_shortest_attempt(kafka_settings: Settings) -> None:
    """``streams.kafka.waiting``: the first attempt's 0.5 s is a valid kafka-python
    configuration (its request timeout must stay above fetch_max_wait_ms, 500 ms: a probe that
    broke that rule failed on every broker with KafkaConfigurationError), and a reachable
    broker ends the wait with what ``then`` returns."""
    from streams.kafka.waiting import FIRST_ATTEMPT_SECONDS, kafka_unreachable, wait_for_kafka

    assert kafka_settings.bootstrap
    assert kafka_unreachable(kafka_settings.bootstrap, kafka_settings.security,
                             FIRST_ATTEMPT_SECONDS) is None
    assert wait_for_kafka(kafka_settings, "gangstate test", timeout=30, say=lambda _: None,
                          then=lambda: 7) == 7
