"""The real pipeline: replay -> Kafka -> Faust worker -> diagnostics/commands/gang table.

All handed cases are replayed, merged by event time, into one set of topics served by one
worker process; each case's expectations are then checked on what the worker wrote, and the
outputs are compared with the offline fold of the same log (identical per gang, in order). The
cases recorded on kube-scheduler v1.37 (``tests/cases/recorded-native``, two days later) are
replayed in a run of their own: merged into the first, the gang summaries the worker sends
between partitions during a replay (the composite case's) would carry a partition's clock two
days ahead while the replay still feeds it older records (see the closing note of issue 26).
"""

from __future__ import annotations

import json

import pytest

from streams.kafka.publishing import Publisher
from streams.settings import Settings
from streams.wire.contracts import parse_time
from streams.core.state import from_wire, summary
from tests.fixtures.casecheck import (handed_case_dirs, native_case_dirs, problems,
                                      recorded_case_dirs)
from producers.replay import merged_by_time
from tests.fixtures.throughkafka import (fresh_settings, offline, with_gated_representative,
                                         worker_run)

pytestmark = pytest.mark.kafka
AT = parse_time("2026-12-02T13:55:00Z")
"""After every case, the recorded ones (the last record at 2026-12-02T13:50) included, with
their timers (stranded: 120 s) due; not ahead of the wall clock, as the worker sets aside a tick
more than 60 s ahead of its Kafka timestamp."""
NATIVE_AT = parse_time("2026-12-04T19:05:00Z")
"""The same after the native cases (the last record at 2026-12-04T18:59)."""


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
    lines = with_gated_representative(handed_case_dirs() + recorded_case_dirs(),
                                      tmp_path_factory.mktemp("trace"))
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


@pytest.fixture(scope="module")
def native_run(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory):
    """One replay of the native cases through a worker of their own, and their offline fold."""
    settings = fresh_settings(kafka_bootstrap, "pipeline-native")
    lines = merged_by_time([case / "trace.jsonl" for case in native_case_dirs()])
    expected = offline(lines, NATIVE_AT)
    with worker_run(settings, tmp_path_factory.mktemp("worker") / "worker.log") as run:
        report = run.replay(lines, at=NATIVE_AT)
        run.caught_up()
        got = run.read()
        table = run.table()
    return {"settings": settings, "report": report, "expected": expected, "got": got,
            "table": table}


@pytest.mark.parametrize("case", handed_case_dirs() + recorded_case_dirs(),
                         ids=lambda p: p.name)
def test_case_through_kafka(pipeline_run, case) -> None:
    _check_case(pipeline_run, case)


@pytest.mark.parametrize("case", native_case_dirs(), ids=lambda p: p.name)
def test_native_case_through_kafka(native_run, case) -> None:
    _check_case(native_run, case)


def test_native_outputs_equal_the_offline_fold(native_run) -> None:
    t = native_run["settings"].topics
    got, expected = native_run["got"], native_run["expected"]
    assert by_key(got[t.diagnostics], "gang") == by_key(expected.diagnostics, "gang")
    assert got[t.commands] == expected.commands == []  # no command for kube-scheduler's gangs
    # 1 too-few-pods, 3 podgroup-missing, 2 composite-short-of-quorum, 1 gated-member,
    # 1 gpu-short, 1 job-created-gang, 2 member-lost
    assert len(got[t.diagnostics]) == 11
    table, states = native_run["table"], expected.states
    assert sorted(table) == sorted(states)
    assert all(summary(from_wire(table[g])) == summary(s) for g, s in states.items())
    # every line published but the 2 Workloads (the fold skips them: no key)
    assert native_run["report"].published == 161
    assert native_run["report"].dropped == {"workloads": 2}


def _check_case(run: dict, case) -> None:
    t = run["settings"].topics
    got = run["got"]
    gangs = {gang: summary(from_wire(value)) for gang, value in run["table"].items()}
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
    # the gated representatives' switches, the activation of sh-gated-3/g's stranded u-2 (rule
    # ST5), and the hold of the recorded shim case sh-gpu/g (3 x 1 GPU on 2 GPUs: held once
    # its episode settled, released when its pods were deleted)
    assert sorted((c["gang_group"], c["type"], c["reason"]) for c in got[t.commands]) == [
        ("sh-gated-3/g", "ActivateGang", "MembersStranded"),
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
