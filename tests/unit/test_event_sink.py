"""The Event sink (``streams.events.sink``) against the TEST API SERVER double, driven through the
real ``kubernetes`` client: the exact Events of every handed case, idempotency across repeats,
restarts and replays, the spam filter, retries and give-ups (the end-to-end run through real
Kafka and the worker is ``tests/kafka/test_event_sink_kafka.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from streams.core.timefmt import parse_time
from streams.events.sink import EventSink, GivenUp, KubeTransport, RetryPolicy
from streams.events.recorder import Create, Drop, Patch, Recorder, Skip, SpamFilter
from streams.wire.traces import fold_trace
from tests.doubles.apiserver import ApiServerDouble

AT = parse_time("2026-11-29T00:00:00Z")
CASES = Path(__file__).resolve().parents[1] / "cases"

MSG = {
    "insufficient": "gang team-a/llm-pretrain has 3 of minMember 4 pods; scheduling is held at "
                    "PreEnqueue until 1 more exists",
    "satisfied-4": "gang team-a/llm-pretrain has 4 of minMember 4 pods; no longer held at "
                   "PreEnqueue",
    "mode": "gang nlp/gpt-distill: mode 'nonstrict' is not valid; the scheduler silently uses "
            "Strict",
    "waiting": "gang nlp/gpt-distill: waiting-time '1h30' is not valid; the scheduler silently "
               "uses 600s",
    "not-init": "gang vision/resnet-ddp is not initialized: 2 pods name it, but no PodGroup and "
                "no valid min-available annotation gives its spec; scheduling is held at PreEnqueue",
    "satisfied-2": "gang vision/resnet-ddp has 2 of minMember 2 pods; no longer held at "
                   "PreEnqueue",
    "conflict-2": "gang research/rl-rollout: members disagree on min-available ('2' on "
                  "rl-rollout-2; '4' on rl-rollout-0, rl-rollout-1); the scheduler keeps the "
                  "value of the object that initialised the gang",
    "conflict-3": "gang research/rl-rollout: members disagree on min-available ('2' on "
                  "rl-rollout-2, rl-rollout-3; '4' on rl-rollout-0, rl-rollout-1); the "
                  "scheduler keeps the value of the object that initialised the gang",
}

# case -> (writes: POSTs, PATCHes), Events as (kind, object, type, reason, count, first, last,
# message key), sorted. Worked out from the case's diagnostics (gangstate fold).
EXPECTED: dict[str, tuple[tuple[int, int], list[tuple[str, str, str, str, int, str, str, str]]]] = {
    "insufficient-members": ((7, 0), sorted(
        [("Pod", f"llm-pretrain-worker-{i}", "Warning", "GangMembersInsufficient", 1,
          "09:00:10", "09:00:10", "insufficient") for i in range(3)]
        + [("Pod", f"llm-pretrain-worker-{i}", "Normal", "GangMembersSatisfied", 1,
            "09:05:00", "09:05:00", "satisfied-4") for i in range(4)])),
    # gpt-distill-1 joins a second later: both findings are sent to it too (one Event each)
    "invalid-spec-values": ((4, 0), [
        ("Pod", "gpt-distill-0", "Warning", "GangSpecInvalid", 1, "09:00:00", "09:00:00",
         "mode"),
        ("Pod", "gpt-distill-0", "Warning", "GangSpecInvalid", 1, "09:00:00", "09:00:00",
         "waiting"),
        ("Pod", "gpt-distill-1", "Warning", "GangSpecInvalid", 1, "09:00:01", "09:00:01",
         "mode"),
        ("Pod", "gpt-distill-1", "Warning", "GangSpecInvalid", 1, "09:00:01", "09:00:01",
         "waiting")]),
    "podgroup-missing": ((5, 0), sorted(
        [("Pod", f"resnet-ddp-{i}", "Warning", "GangNotInitialized", 1, "09:00:10", "09:00:10",
          "not-init") for i in range(2)]
        + [("Pod", f"resnet-ddp-{i}", "Normal", "GangMembersSatisfied", 1, "09:02:00",
            "09:02:00", "satisfied-2") for i in range(2)]
        + [("PodGroup", "resnet-ddp", "Normal", "GangMembersSatisfied", 1, "09:02:00",
            "09:02:00", "satisfied-2")])),
    "recreated-same-name": ((0, 0), []),
    "spec-conflict": ((4, 3), sorted(
        [("Pod", f"rl-rollout-{i}", "Warning", "GangSpecConflict", 2, "09:00:04", "09:00:06",
          "conflict-3") for i in range(3)]
        + [("Pod", "rl-rollout-3", "Warning", "GangSpecConflict", 1, "09:00:06", "09:00:06",
            "conflict-3")])),
}


def diagnostics_of(case: str) -> list[dict[str, Any]]:
    return fold_trace(CASES / case / "trace.jsonl", AT).diagnostics


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str, str, str, int, str, str, str]]:
    """Events as table rows; times as HH:MM:SS of 2026-11-02, messages by their MSG key."""
    names = {text: key for key, text in MSG.items()}
    rows = []
    for e in events:
        inv = e["involvedObject"]
        assert e["firstTimestamp"].startswith("2026-11-02T") and e["source"] == {
            "component": "gangstate"} and e["reportingComponent"] == "gangstate"
        rows.append((inv["kind"], inv["name"], e["type"], e["reason"], e["count"],
                     e["firstTimestamp"][11:19], e["lastTimestamp"][11:19],
                     names.get(e["message"], e["message"])))
    return sorted(rows)


def writes(server: ApiServerDouble) -> tuple[int, int]:
    methods = [m for m, path, _ in server.requests if "/events" in path]
    return methods.count("POST"), methods.count("PATCH")


@pytest.fixture
def server() -> Iterator[ApiServerDouble]:
    with ApiServerDouble() as s:
        yield s


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make_sink(server: ApiServerDouble, api: str = "core/v1", burst: int = 25,
              clock: Any = lambda: 0.0, tries: int = 12, **kw: Any) -> EventSink:
    transport = KubeTransport.from_configuration(server.configuration())
    return EventSink(transport, api=api, instance="sink-test",  # type: ignore[arg-type]
                     recorder=Recorder(SpamFilter(clock, burst=burst)),
                     retry=RetryPolicy(tries=tries), sleep=kw.pop("sleep", Sleeps()), **kw)


# -- every handed case ----------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_events_of_each_case(server: ApiServerDouble, case: str) -> None:
    sink = make_sink(server)
    for diagnostic in diagnostics_of(case):
        sink.write(diagnostic)
    (posts, patches), rows = EXPECTED[case]
    events = server.objects("events")
    assert summary(events) == rows
    assert writes(server) == (posts, patches)
    assert all(e["metadata"]["name"].startswith(e["involvedObject"]["name"] + ".")
               and e["reportingInstance"] == "sink-test" for e in events)


def test_events_k8s_io_v1_series(server: ApiServerDouble) -> None:
    sink = make_sink(server, api="events.k8s.io/v1")
    for diagnostic in diagnostics_of("spec-conflict"):
        sink.write(diagnostic)
    events = sorted(server.objects("events.k8s.io"), key=lambda e: e["regarding"]["name"])
    assert server.objects("events") == [] and len(events) == 4
    for e in events[:3]:  # rl-rollout-0..2: told at 09:00:04, told again at 09:00:06
        assert e["series"] == {"count": 2, "lastObservedTime": "2026-11-02T09:00:06.000000Z"}
        assert e["eventTime"] == "2026-11-02T09:00:04.000000Z"
        assert e["note"] == MSG["conflict-2"]  # note is immutable
        assert (e["reportingController"], e["action"], e["type"]) == (
            "gangstate", "Diagnose", "Warning")
    assert events[3]["regarding"]["name"] == "rl-rollout-3" and "series" not in events[3]
    assert events[3]["note"] == MSG["conflict-3"]


# -- idempotency ----------------------------------------------------------------------------

def all_diagnostics() -> list[dict[str, Any]]:
    return [d for case in sorted(EXPECTED) for d in diagnostics_of(case)]


def test_processing_the_same_diagnostics_twice_writes_nothing_more(server: ApiServerDouble
                                                                   ) -> None:
    sink = make_sink(server)
    for d in all_diagnostics():
        sink.write(d)
    before, counts = server.objects("events"), writes(server)
    results = [r for d in all_diagnostics() for r in sink.write(d)]
    assert server.objects("events") == before and writes(server) == counts == (20, 3)
    assert {type(r) for r in results} == {Skip, Drop}
    assert (sink.metrics.value("skipped", "duplicate"), sink.metrics.value("skipped", "stale"),
            sink.metrics.value("dropped", "series-ended")) == (15, 3, 5)


def test_a_restarted_sink_replaying_everything_writes_nothing(server: ApiServerDouble) -> None:
    first = make_sink(server)
    for d in all_diagnostics():
        first.write(d)
    before, counts = server.objects("events"), writes(server)
    restarted = make_sink(server)  # empty cache: it GETs the Events by their names
    for d in all_diagnostics():
        restarted.write(d)
    assert server.objects("events") == before and writes(server) == counts
    gets = [p for m, p, _ in server.requests if m == "GET"]
    assert len(gets) > 0 and restarted.metrics.value("created", "GangSpecConflict") == 0


def test_a_late_stale_warning_after_the_normal_is_dropped(server: ApiServerDouble) -> None:
    sink = make_sink(server)
    diagnostics = diagnostics_of("insufficient-members")
    for d in diagnostics:
        sink.write(d)
    late = {**diagnostics[0], "id": "team-a/llm-pretrain#GangMembersInsufficient#0123456789ab",
            "observed_at": "2026-11-02T09:04:59.000000Z"}
    assert {type(r) for r in make_sink(server).write(late)} == {Drop}
    newer = {**late, "observed_at": "2026-11-02T09:10:00.000000Z"}
    results = sink.write(newer)
    assert [type(r) for r in results] == [Patch, Patch, Patch]  # a new series
    assert writes(server) == (7, 3)


def test_a_patch_of_a_vanished_event_creates_it(server: ApiServerDouble) -> None:
    sink = make_sink(server)
    first, *_ = diagnostics_of("spec-conflict")
    sink.write(first)
    victim = server.objects("events")[0]
    server.delete("events", victim["metadata"]["namespace"], victim["metadata"]["name"])
    sink.write(diagnostics_of("spec-conflict")[1])
    again = [e for e in server.objects("events")
             if e["metadata"]["name"] == victim["metadata"]["name"]]
    assert len(again) == 1 and again[0]["count"] == 2
    assert again[0]["firstTimestamp"] == "2026-11-02T09:00:04Z"


def test_recreated_pods_of_a_gang_with_invalid_settings_get_their_own_events(
        server: ApiServerDouble) -> None:
    """Issue 11: the pods of a `mode: nonstrict` gang are deleted and recreated with new uids
    (tests/unit/test_fold.py works out the diagnostics): each pod, old and new, has its Event once,
    and a replay of the same diagnostics writes nothing."""
    from tests.fixtures.builders import fold_records, pod

    trace = [pod("p0", 0, mode="nonstrict"), pod("p1", 1, mode="nonstrict"),
             pod("p0", 20, rv="2", type_="DELETED", mode="nonstrict"),
             pod("p1", 21, rv="2", type_="DELETED", mode="nonstrict"),
             pod("q0", 30, mode="nonstrict"), pod("q1", 31, mode="nonstrict")]
    diagnostics = fold_records(trace)
    sink = make_sink(server)
    for _ in range(2):
        for diagnostic in diagnostics:
            sink.write(diagnostic)
    events = server.objects("events")
    assert sorted((e["involvedObject"]["name"], e["involvedObject"]["uid"], e["reason"],
                   e["count"]) for e in events) == [
        ("p0", "uid-p0", "GangSpecInvalid", 1), ("p1", "uid-p1", "GangSpecInvalid", 1),
        ("q0", "uid-q0", "GangSpecInvalid", 1), ("q1", "uid-q1", "GangSpecInvalid", 1)]
    assert {e["message"] for e in events} == {
        "gang ns/g: mode 'nonstrict' is not valid; the scheduler silently uses Strict"}
    assert writes(server) == (4, 0) and sink.metrics.value("skipped", "duplicate") == 4


# -- spam filter ----------------------------------------------------------------------------

def test_spam_filter_limits_writes_per_object(server: ApiServerDouble) -> None:
    now = [0.0]
    sink = make_sink(server, burst=2, clock=lambda: now[0])
    base = diagnostics_of("invalid-spec-values")[0]
    for i in range(4):
        sink.write({**base, "id": f"nlp/gpt-distill#GangSpecInvalid#{i:012d}",
                    "observed_at": f"2026-11-02T09:0{i}:00.000000Z"})
    (event,) = server.objects("events")
    assert event["count"] == 2 and writes(server) == (1, 1)
    assert sink.metrics.value("dropped", "spam") == 2
    now[0] += 300.0  # one token back
    sink.write({**base, "id": "nlp/gpt-distill#GangSpecInvalid#999999999999",
                "observed_at": "2026-11-02T09:09:00.000000Z"})
    assert server.objects("events")[0]["count"] == 3


# -- API failures ---------------------------------------------------------------------------

def test_5xx_is_retried_with_backoff(server: ApiServerDouble) -> None:
    sleeps = Sleeps()
    sink = make_sink(server, sleep=sleeps)
    server.fail_next(503, count=2, method="POST")
    results = sink.write(diagnostics_of("invalid-spec-values")[0])
    assert [type(r) for r in results] == [Create]
    assert sleeps == [0.5, 1.0] and writes(server) == (3, 0)
    assert len(server.objects("events")) == 1


def test_429_honours_retry_after(server: ApiServerDouble) -> None:
    sleeps = Sleeps()
    sink = make_sink(server, sleep=sleeps)
    server.fail_next(429, method="GET", retry_after=3)
    sink.write(diagnostics_of("invalid-spec-values")[0])
    assert sleeps == [3.0] and len(server.objects("events")) == 1


def test_4xx_gives_the_event_up_counted_and_goes_on(server: ApiServerDouble) -> None:
    sleeps = Sleeps()
    sink = make_sink(server, sleep=sleeps)
    server.fail_next(422, method="POST")
    first, second = diagnostics_of("invalid-spec-values")[:2]  # gpt-distill-0's two
    (result,) = sink.write(first)
    assert isinstance(result, GivenUp) and result.reason == "api-422"
    assert [type(r) for r in sink.write(second)] == [Create]
    assert sleeps == [] and sink.metrics.value("dropped", "api-422") == 1
    assert [e["message"] for e in server.objects("events")] == [MSG["waiting"]]


def test_a_create_that_meets_an_existing_event_decides_once_more(server: ApiServerDouble) -> None:
    """409 on a create (another writer, or a cache that said absent): the cached state is
    forgotten, the Event read back and the decision taken again, once, without a wait; a
    second 409 gives the Event up as ``conflict``."""
    sleeps = Sleeps()
    sink = make_sink(server, sleep=sleeps)
    first, second = diagnostics_of("invalid-spec-values")[:2]
    server.fail_next(409, method="POST")
    assert [type(r) for r in sink.write(first)] == [Create]
    assert len(server.objects("events")) == 1
    server.fail_next(409, count=2, method="POST")
    (result,) = sink.write(second)
    assert isinstance(result, GivenUp) and result.reason == "conflict"
    assert sleeps == [] and sink.metrics.value("dropped", "conflict") == 1


def test_retries_end_after_the_last_try(server: ApiServerDouble) -> None:
    sink = make_sink(server, tries=3)
    server.fail_next(500, count=3, method="GET")
    (result,) = sink.write(diagnostics_of("invalid-spec-values")[0])
    assert isinstance(result, GivenUp) and result.reason == "retries-exhausted"
    assert sink.metrics.value("dropped", "retries-exhausted") == 1
    assert sink.metrics.registry.get_sample_value(
        "gangstate_sink_api_retries_total", {"status": "500"}) == 2


def test_transport_errors_are_retried(server: ApiServerDouble) -> None:
    real = KubeTransport.from_configuration(server.configuration())
    calls = []

    def flaky(method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        calls.append(method)
        if len(calls) == 1:
            raise ConnectionResetError("connection reset by peer")
        return real(method, path, body, content_type or "application/json")

    sink = EventSink(flaky, instance="t", sleep=Sleeps())
    assert [type(r) for r in sink.write(diagnostics_of("invalid-spec-values")[0])] == [Create]
    assert calls[:2] == ["GET", "GET"]


def test_invalid_records_are_counted_and_skipped(server: ApiServerDouble) -> None:
    sink = make_sink(server)
    assert sink.write_raw(b"not json") == []
    assert sink.write_raw(json.dumps({"schema": "gangstate.diagnostic/v1"})) == []
    assert sink.metrics.value("dropped", "invalid-diagnostic") == 2


def test_dry_run_prints_what_it_would_write(tmp_path: Path, capsys: Any) -> None:
    from streams.cli import main

    trace = tmp_path / "d.jsonl"
    trace.write_text("".join(json.dumps(d) + "\n" for d in diagnostics_of("spec-conflict")))
    assert main(["sink", "--dry-run", "--input", str(trace), "--instance", "x"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["verb"] for line in lines] == ["create"] * 3 + ["patch"] * 3 + ["create"]
    assert lines[3]["body"]["count"] == 2 and lines[0]["path"] == \
        "/api/v1/namespaces/research/events"


def test_wasted_preemption_events_reach_victims_gone_or_in_other_namespaces(
        server: ApiServerDouble) -> None:
    """``GangPreemptionWasted`` names the gang's pods and the victims (namespace ``low``), which
    are gone by then: the sink writes each Event in its object's namespace all the same (the
    API server does not check ``involvedObject``; kubernetes v1.35.2
    ``pkg/apis/core/validation/events.go`` checks only that the namespaces agree)."""
    from tests.unit.test_preemption import diagnostics as only_diagnostics
    from tests.fixtures.builders import fold_records
    from tests.unit.test_preemption import wasted_recs
    [wasted] = [d for d in only_diagnostics(fold_records(wasted_recs()))
                if d["reason"] == "GangPreemptionWasted"]
    results = make_sink(server).write(wasted)
    assert [type(r) for r in results] == [Create] * 5
    events = server.objects("events")
    assert sorted((e["metadata"]["namespace"], e["involvedObject"]["name"], e["reason"],
                   e["type"]) for e in events) == [
        ("low", "v-0", "GangPreemptionWasted", "Warning"),
        ("low", "v-1", "GangPreemptionWasted", "Warning"),
        ("ns", "g-0", "GangPreemptionWasted", "Warning"),
        ("ns", "g-1", "GangPreemptionWasted", "Warning"),
        ("ns", "g-2", "GangPreemptionWasted", "Warning")]
    assert all(e["message"] == wasted["message"] for e in events)


@pytest.mark.parametrize("api,store,ref", [("core/v1", "events", "involvedObject"),
                                           ("events.k8s.io/v1", "events.k8s.io", "regarding")])
def test_a_native_podgroups_event_names_its_api_version(server: ApiServerDouble, api: str,
                                                        store: str, ref: str) -> None:
    """A diagnostic of a native gang from Kafka (through the contract model, which keeps the
    optional ``apiVersion`` of an involved object): the PodGroup's Event names
    ``scheduling.k8s.io/v1beta1`` (``kubectl describe podgroup.scheduling.k8s.io`` lists it),
    the Pod's ``v1``; in the gang's namespace, as every Event (no other RBAC)."""
    from tests.unit.test_event_recorder import NATIVE_DIAGNOSTIC

    sink = make_sink(server, api=api)
    sink.write_raw(json.dumps(NATIVE_DIAGNOSTIC))
    assert sorted((e[ref]["kind"], e[ref]["apiVersion"], e["metadata"]["namespace"])
                  for e in server.objects(store)) == [
        ("Pod", "v1", "ml"), ("PodGroup", "scheduling.k8s.io/v1beta1", "ml")]
