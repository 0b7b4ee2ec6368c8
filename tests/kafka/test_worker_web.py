"""The worker's HTTP views and metrics (``streams.worker.web``, ``streams.worker.metrics``).

The Kafka tests start one worker with ``--web-port`` (module-scoped), replay every handed case
into it merged by event time (as ``tests/kafka/test_pipeline.py`` does), wait until it has caught up,
and then read the views, run the CLI against ``--server``, and scrape ``/metrics``. What the
views serve is compared with the offline fold of the same log and with values worked out by
hand. The collector and counters are also tested without Kafka, on offline states.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from streams.kafka.publishing import Publisher
from streams.cli import main
from streams.wire.contracts import parse_time
from streams.core.records import AckObserved
from streams.wire.decoding import Decoded
from streams.worker.metrics import TableCollector, WorkerMetrics
from streams.wire.traces import fold_lines, fold_trace
from streams.query.answers import fleet_summary, gang_detail, gang_rows
from tests.fixtures.casecheck import handed_case_dirs
from tests.fixtures.throughkafka import (fresh_settings, log_tail, offline,
                                         with_gated_representative, worker_run)

AT = parse_time("2026-11-29T00:00:00Z")
CASES = Path(__file__).resolve().parents[1] / "cases"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text exposition: ``(name, sorted labels) -> value``."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def plain(doc: object) -> object:
    """``doc`` as it looks after a JSON round trip (tuples become lists)."""
    return json.loads(json.dumps(doc))


# -- without Kafka: the collector and the counters ----------------------------------------------

@pytest.mark.parametrize("case, at, phase, reason, held", [
    ("insufficient-members", "2026-11-02T09:04:00Z", "Gathering", "GangMembersInsufficient", 3),
    ("podgroup-missing", "2026-11-02T09:01:00Z", "NotInitialized", "GangNotInitialized", 2),
    ("insufficient-members", "2026-11-29T00:00:00Z", "Ready", "GangMembersInsufficient", 0),
])
def test_table_collector_counts_gangs_by_phase_and_held_pods(case, at, phase, reason,
                                                              held) -> None:
    from producers.replay import file_lines

    cut = parse_time(at)
    lines = [(n, raw) for _, n, raw in file_lines([CASES / case / "trace.jsonl"])
             if parse_time(json.loads(raw)["observed_at"]) <= cut]
    states = fold_lines(lines, cut).states
    metrics = WorkerMetrics()
    metrics.registry.register(TableCollector(states))
    from prometheus_client import generate_latest

    got = samples(generate_latest(metrics.registry).decode())
    default, koord = ("cluster", "default"), ("scheduler", "koord-scheduler")
    assert got[("gangstate_gangs", (default, ("phase", phase), koord))] == 1
    assert sum(v for (n, _), v in got.items() if n == "gangstate_gangs") == 1
    assert got[("gangstate_pods_held_preenqueue", (default, ("reason", reason), koord))] == held
    assert sum(v for (n, _), v in got.items() if n == "gangstate_pods_held_preenqueue") == held


def test_the_scheduler_storm_is_a_gauge_per_gang() -> None:
    """The real excerpt (tests/data/README.md): its 42 FailedScheduling Events of gang sc-b/gb
    all fall within the last 60 s of the gang's event time; a gang without any has no series."""
    from producers.watch.watching import GangRouter, Publish
    from prometheus_client import generate_latest

    items = json.loads((Path(__file__).resolve().parents[1] / "data" /
                        "koord-v1.8.0-gpu-short-excerpt.json").read_text())["items"]
    router, lines = GangRouter(), []
    for item in items:
        at = parse_time(item.get("eventTime") or "2026-12-01T03:41:27Z")
        lines += [(len(lines), json.dumps(a.record).encode()) for a in router.route(
            "pods" if item["kind"] == "Pod" else "events", "SYNC", item, None, at)
            if isinstance(a, Publish)]
    states = fold_lines(lines, None).states
    states.update(fold_trace(CASES / "insufficient-members" / "trace.jsonl", None).states)
    metrics = WorkerMetrics()
    metrics.registry.register(TableCollector(states))
    got = samples(generate_latest(metrics.registry).decode())
    storm = {labels: v for (n, labels), v in got.items()
             if n == "gangstate_scheduler_failed_events_per_minute"}
    assert storm == {(("cluster", "default"), ("gang", "sc-b/gb")): 42}


def test_worker_metrics_count_acks_records_and_outputs() -> None:
    metrics = WorkerMetrics()
    ack = AckObserved(at=1, command_id="team-g/g#1", gang_group="team-g/g",
                      epoch=1, outcome="Applied", representative="team-g/u-0")
    metrics.folded(Decoded("team-g/g", ack), [])
    metrics.folded(Decoded(None, None, "no-gang"), [
        {"schema": "gangstate.diagnostic/v1", "reason": "GangScheduled"},
        {"schema": "gangstate.command/v1", "type": "ElectRepresentative"},
        {"schema": "gangstate.gang-summary/v1"}])
    metrics.dead_lettered("internal-error")
    body, content_type = metrics.exposition()
    got = samples(body.decode())
    assert content_type.startswith("text/plain")
    assert got[("gangstate_acks_total", (("outcome", "Applied"),))] == 1
    assert got[("gangstate_records_total", (("schema", "gangstate.ack/v1"),))] == 1
    assert got[("gangstate_records_total", (("schema", "gangstate.kube/v1"),))] == 1
    assert got[("gangstate_diagnostics_total", (("reason", "GangScheduled"),))] == 1
    assert got[("gangstate_commands_total", (("type", "ElectRepresentative"),))] == 1
    assert got[("gangstate_dead_letters_total", (("reason", "internal-error"),))] == 1
    # A second app's metrics start from zero: registries are per app.
    assert ("gangstate_acks_total", (("outcome", "Applied"),)) not in samples(
        WorkerMetrics().exposition()[0].decode())


# -- one worker with --web-port ------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory):
    """One worker serving its views, fed every handed case and the shim's gated representative
    (``tracegen.gated_representative``: gang team-g/g, one command), merged by time, and one
    malformed record; yields the base URL and the offline fold of the same log."""
    settings = fresh_settings(kafka_bootstrap, "views")
    folder = tmp_path_factory.mktemp("views-trace")
    lines = with_gated_representative(handed_case_dirs(), folder)
    gated = folder / "gated.jsonl"
    expected = offline(lines, AT)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("views-worker") / "worker.log"
    with worker_run(settings, log, extra_args=("--web-port", str(port))) as run:
        pub = Publisher(settings)
        pub.send(settings.topics.gang_events, "team-a/llm-pretrain", b"not json at all")
        pub.flush()
        run.replay(lines, at=AT, publisher=pub)
        pub.close()
        run.caught_up()
        deadline = time.monotonic() + 30
        while True:  # the web server may come up after the first records are folded
            try:
                if requests.get(base + "/gangs", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline and run.alive(), log_tail(log)
            time.sleep(0.2)
        yield {"base": base, "expected": expected, "gated": gated}



@pytest.mark.kafka
def test_list_view_lists_every_gang_sorted_with_phase_and_counts(served) -> None:
    base, expected = served["base"], served["expected"]
    body = requests.get(base + "/gangs", timeout=10).json()
    assert body == {"gangs": plain(gang_rows(expected.states.values()))}
    assert [r["gang"] for r in body["gangs"]] == [
        "nlp/gpt-distill", "research/rl-rollout", "team-a/llm-pretrain", "team-c/bert-large",
        "team-g/g", "vision/resnet-ddp"]
    gated = body["gangs"][4]
    assert gated == {"cluster": "default", "gang": "team-g/g", "namespace": "team-g",
                     "name": "g", "scheduler": "koord-scheduler", "phase": "Scheduling",
                     "members": 3, "bound": 0, "waiting": 0, "min_member": 2,
                     "representative": "team-g/g-0"}
    only = requests.get(base + "/gangs", params={"phase": "Scheduling"}, timeout=10).json()
    assert [r["gang"] for r in only["gangs"]] == ["team-g/g"]
    # the handed cases are all Koordinator's: none is kube-scheduler's
    native = requests.get(base + "/gangs", params={"scheduler": "kube-scheduler"},
                          timeout=10).json()
    assert native == {"gangs": []}
    bad = requests.get(base + "/gangs", params={"scheduler": "volcano"}, timeout=10)
    assert bad.status_code == 400 and "unknown scheduler 'volcano'" in bad.json()["error"]
    ns = requests.get(base + "/gangs", params={"namespace": "team-c"}, timeout=10).json()
    assert [(r["gang"], r["members"], r["min_member"]) for r in ns["gangs"]] == [
        ("team-c/bert-large", 4, 4)]
    bad = requests.get(base + "/gangs", params={"phase": "Stuck"}, timeout=10)
    assert bad.status_code == 400 and "unknown phase 'Stuck'" in bad.json()["error"]


@pytest.mark.kafka
def test_gang_view_is_summary_findings_and_history(served) -> None:
    base, expected = served["base"], served["expected"]
    doc = requests.get(base + "/gangs/team-g/g", timeout=10).json()
    assert doc == plain(gang_detail(expected.states["team-g/g"]))
    assert doc["epoch"] == 1 and doc["last_cycle"] == 40
    assert doc["findings"] == []  # 2 of minMember 2 free of gates: nothing holds it
    assert len(doc["history"]) == 4
    assert doc["history"][3] == {
        "at": "2026-11-02T09:00:03.000000Z",
        "change": "phase Ready -> Scheduling; representative - -> team-g/g-0; "
                  "issued SwitchRepresentative epoch 1",
        "cause": "cycle 40: team-g/u-1 PreEnqueue UnschedulableAndUnresolvable "
                 "(RepresentativeExists)"}
    spec = requests.get(base + "/gangs/nlp/gpt-distill", timeout=10).json()
    assert [(f["reason"], f["facts"]["field"]) for f in spec["findings"]] == [
        ("GangSpecInvalid", "mode"), ("GangSpecInvalid", "waiting-time")]
    missing = requests.get(base + "/gangs/team-b/no-such-gang", timeout=10)
    assert missing.status_code == 404
    assert missing.json() == {"error": "gang team-b/no-such-gang not found"}


@pytest.mark.kafka
def test_why_view_explains_the_pod_with_or_without_its_gang(served) -> None:
    base = served["base"]
    url = base + "/pods/team-g/g-0/why"
    doc = requests.get(url, timeout=10).json()
    assert doc["gang"] == "team-g/g" and doc["held_at"] == "PreEnqueue"
    assert doc["held_by"] == "schedulingGates of team-g/g-0" and doc["last_cycle"] is None
    assert [r["reason"] for r in doc["reasons"]] == ["SchedulingGated"]
    assert doc["unblock"] == ["remove the scheduling gates of team-g/g-0, set by the controller "
                              "that owns them (g-0 waits for example.com/quota)"]
    assert requests.get(url, params={"gang": "team-g/g"}, timeout=10).json() == doc
    unknown = requests.get(base + "/pods/team-b/ghost/why", timeout=10)
    assert unknown.status_code == 404
    assert unknown.json() == {"error": "pod team-b/ghost is not a live member of any known gang"}
    wrong = requests.get(url, params={"gang": "team-a/llm-pretrain"}, timeout=10)
    assert wrong.status_code == 404
    assert wrong.json()["error"] == ("pod team-g/g-0 is not a live member of "
                                     "gang team-a/llm-pretrain")
    nogang = requests.get(url, params={"gang": "team-b/nope"}, timeout=10)
    assert nogang.status_code == 404 and nogang.json() == {"error": "gang team-b/nope not found"}


@pytest.mark.kafka
def test_cli_against_the_worker_prints_what_the_offline_fold_prints(served, capsys) -> None:
    base = served["base"]
    traces = [a for case in handed_case_dirs() for a in ("--from", str(case / "trace.jsonl"))]
    traces += ["--from", str(served["gated"])]
    for argv in (["get", "gangs"], ["get", "gangs", "-n", "team-g", "-o", "json"],
                 ["describe", "gang", "team-g/g"],
                 ["explain", "pod", "team-a/llm-pretrain-worker-3"]):
        assert main([*argv, "--server", base]) == 0
        served_out = capsys.readouterr().out
        assert main([*argv, *traces, "--at", "2026-11-29T00:00:00Z"]) == 0
        assert served_out == capsys.readouterr().out
    assert main(["explain", "pod", "team-g/g-0", "--server", base]) == 0
    out = capsys.readouterr().out
    assert "Held at:        PreEnqueue" in out
    assert "  - remove the scheduling gates of team-g/g-0, set by the controller" in out
    assert main(["describe", "gang", "team-b/nope", "--server", base]) == 1
    assert capsys.readouterr().err == "gangstate describe: gang team-b/nope not found\n"


@pytest.mark.kafka
def test_metrics_scrape_counts_what_the_worker_folded(served) -> None:
    resp = requests.get(served["base"] + "/metrics", timeout=10)
    assert resp.status_code == 200 and resp.headers["Content-Type"].startswith("text/plain")
    got = samples(resp.text)

    def value(name: str, **labels: str) -> float:
        return got[(name, tuple(sorted(labels.items())))]

    diagnostics = {"GangSpecInvalid": 4, "GangSpecConflict": 2,
                   "GangMembersInsufficient": 1, "GangMembersSatisfied": 2,
                   "GangNotInitialized": 1}
    for reason, n in diagnostics.items():
        assert value("gangstate_diagnostics_total", reason=reason) == n, reason
    assert sum(v for (n, _), v in got.items() if n == "gangstate_diagnostics_total") == 10
    assert value("gangstate_commands_total", type="SwitchRepresentative") == 1  # team-g/g
    # 19 Pods of the cases and 3 of team-g/g; 3 cycle records of insufficient-members and the
    # shim's one; one tick per partition
    assert value("gangstate_records_total", schema="gangstate.kube/v1") == 22
    assert value("gangstate_records_total", schema="gangstate.cycle/v1") == 4
    assert value("gangstate_records_total", schema="gangstate.tick/v1") == 8
    assert value("gangstate_dead_letters_total", reason="invalid-record") == 1
    assert value("gangstate_fold_seconds_count") == 34
    assert 0 < value("gangstate_fold_seconds_sum") < 34
    koord, default = "koord-scheduler", "default"
    assert value("gangstate_gangs", cluster=default, phase="Ready", scheduler=koord) == 5
    assert value("gangstate_gangs", cluster=default, phase="Scheduling", scheduler=koord) == 1
    assert value("gangstate_gangs", cluster=default, phase="Gathering", scheduler=koord) == 0
    assert value("gangstate_gangs", cluster=default, phase="Deleted", scheduler=koord) == 0
    assert value("gangstate_gangs", cluster=default, phase="Ready",
                 scheduler="kube-scheduler") == 0
    assert value("gangstate_pods_held_preenqueue", cluster=default,
                 reason="GangMembersInsufficient", scheduler=koord) == 0


@pytest.mark.kafka
def test_fausts_builtin_views_stay_disabled(served) -> None:
    for path in ("/table/gangs", "/table", "/router", "/graph"):
        assert requests.get(served["base"] + path, timeout=10).status_code == 404, path


# -- a fleet: one worker fed three clusters (tests/unit/test_fleet_query.py) ----------------------

FLEET_AT = "2026-12-01T03:42:00Z"


@pytest.fixture(scope="module")
def fleet_served(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory):
    """One worker serving its views, fed the three-cluster fleet of
    ``tests/unit/test_fleet_query.py`` (``team-a/llm`` in default, eu-1 and us-2) with
    ``GANGSTATE_METRICS_MAX_CLUSTERS=2``; yields the base URL, the trace and the offline fold
    of the same records."""
    from producers.replay import merged_by_time
    from tests.unit.test_fleet_query import fleet_records

    settings = fresh_settings(kafka_bootstrap, "fleet-views")
    folder = tmp_path_factory.mktemp("fleet-trace")
    trace = folder / "fleet.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in fleet_records()))
    lines = merged_by_time([trace])
    at = parse_time(FLEET_AT)
    expected = offline(lines, at)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("fleet-worker") / "worker.log"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GANGSTATE_METRICS_MAX_CLUSTERS", "2")
        env.delenv("GANGSTATE_CLUSTER", raising=False)
        with worker_run(settings, log, extra_args=("--http-port", str(port))) as run:
            run.replay(lines, at=at)
            run.caught_up()
            deadline = time.monotonic() + 30
            while True:
                try:
                    if requests.get(base + "/fleet", timeout=2).status_code == 200:
                        break
                except requests.ConnectionError:
                    pass
                assert time.monotonic() < deadline and run.alive(), log_tail(log)
                time.sleep(0.2)
            yield {"base": base, "expected": expected, "trace": str(trace)}


@pytest.mark.kafka
def test_fleet_views_read_one_cluster_or_all(fleet_served) -> None:
    base, states = fleet_served["base"], fleet_served["expected"].states
    get = lambda path, **params: requests.get(base + path, params=params, timeout=10)  # noqa: E731
    assert get("/gangs").json() == {"gangs": plain(gang_rows(states.values()))}
    assert [r["gang"] for r in get("/gangs", cluster="eu-1").json()["gangs"]] == [
        "team-a/llm", "team-b/etl", "team-c/done"]
    every = get("/gangs", all_clusters="1").json()["gangs"]
    assert every == plain(gang_rows(states.values(), cluster=None))
    assert [(r["cluster"], r["gang"]) for r in every if r["name"] == "llm"] == [
        ("default", "team-a/llm"), ("eu-1", "team-a/llm"), ("us-2", "team-a/llm")]
    both = get("/gangs", cluster="eu-1", all_clusters="1")
    assert both.status_code == 400
    assert both.json() == {"error": "cluster and all_clusters exclude each other"}
    bad = get("/gangs", cluster="EU")
    assert bad.status_code == 400 and "is not a DNS-1123 label" in bad.json()["error"]
    # one gang: the key of the name in the cluster asked
    for cluster, phase in (("default", "Gathering"), ("eu-1", "Ready"),
                           ("us-2", "NotInitialized")):
        doc = get("/gangs/team-a/llm", cluster=cluster).json()
        key = "team-a/llm" if cluster == "default" else f"{cluster}:team-a/llm"
        assert doc == plain(gang_detail(states[key])) and doc["phase"] == phase
    assert get("/gangs/team-a/llm").json()["phase"] == "Gathering"
    missing = get("/gangs/sc-b/gb", cluster="eu-1")
    assert missing.status_code == 404
    assert missing.json() == {"error": "gang sc-b/gb not found in cluster eu-1"}
    why = get("/pods/team-a/llm-0/why", cluster="us-2").json()
    assert (why["cluster"], why["held_at"]) == ("us-2", "PreEnqueue")
    assert [r["reason"] for r in why["reasons"]] == ["GangNotInitialized"]
    assert get("/pods/team-a/llm-0/why", gang="team-a/llm", cluster="us-2").json() == why
    assert [r["reason"] for r in get("/pods/team-a/llm-0/why").json()["reasons"]] == [
        "GangMembersInsufficient"]
    nowhere = get("/pods/sc-b/gb-0/why", cluster="eu-1")
    assert nowhere.status_code == 404
    assert nowhere.json() == {"error": "pod sc-b/gb-0 is not a live member of any known gang "
                                       "in cluster eu-1"}


@pytest.mark.kafka
def test_fleet_view_sums_each_cluster(fleet_served) -> None:
    body = requests.get(fleet_served["base"] + "/fleet", timeout=10).json()
    # the replay's final ticks carry no cluster: the worker heard the default cluster at
    # FLEET_AT, and no tick of eu-1 or us-2 (their rows say so: last_tick None)
    heard = {"default": parse_time(FLEET_AT)}
    assert body == {"clusters": plain(fleet_summary(fleet_served["expected"].states.items(),
                                                    heard=heard))}
    assert [(r["cluster"], r["tick_behind_seconds"]) for r in body["clusters"]] == [
        ("default", 0), ("eu-1", None), ("us-2", None)]
    assert [(r["cluster"], r["gangs"], r["warning_gangs"], r["failed_events_per_minute"])
            for r in body["clusters"]] == [("default", 1, 1, 0), ("eu-1", 3, 0, 0),
                                           ("us-2", 2, 2, 42)]


@pytest.mark.kafka
def test_fleet_cli_against_the_worker_prints_what_the_offline_fold_prints(
        fleet_served, capsys, monkeypatch) -> None:
    monkeypatch.delenv("GANGSTATE_CLUSTER", raising=False)
    monkeypatch.setenv("GANGSTATE_CLUSTER_CONTEXTS", "kind-eu=eu-1,prod-us=us-2")
    offline_args = ["--from", fleet_served["trace"], "--at", FLEET_AT]
    for argv in (["get", "gangs"], ["get", "gangs", "--cluster", "eu-1"],
                 ["get", "gangs", "--all-clusters"], ["get", "gangs", "--all-clusters", "-o",
                                                      "json"],
                 ["describe", "gang", "team-a/llm", "--context", "kind-eu"],
                 ["describe", "gang", "sc-b/gb", "--cluster", "us-2"],
                 ["explain", "pod", "team-a/llm-0", "--context", "prod-us"],
                 ["explain", "pod", "team-a/llm-0", "--gang", "team-a/llm", "--cluster",
                  "eu-1"]):
        assert main([*argv, "--server", fleet_served["base"]]) == 0, argv
        served_out = capsys.readouterr().out
        assert main([*argv, *offline_args]) == 0, argv
        assert served_out == capsys.readouterr().out, argv
    # get fleet: the same, but the worker heard the default cluster's ticks (the replay's
    # final ones, FLEET_AT): its row says how far behind, the trace's cannot
    assert main(["get", "fleet", "--server", fleet_served["base"]]) == 0
    served_out = capsys.readouterr().out
    assert main(["get", "fleet", *offline_args]) == 0
    offline_out = capsys.readouterr().out
    assert served_out.splitlines()[1].endswith("0s behind"), served_out
    assert served_out == offline_out.replace("<none>\n", "0s behind\n", 1), served_out
    assert main(["describe", "gang", "sc-b/gb", "--context", "kind-eu", "--server",
                 fleet_served["base"]]) == 1
    assert capsys.readouterr().err == ("gangstate describe: gang sc-b/gb not found in cluster "
                                       "eu-1\n")


@pytest.mark.kafka
def test_fleet_metrics_bound_the_clusters(fleet_served) -> None:
    """GANGSTATE_METRICS_MAX_CLUSTERS=2: default and eu-1 (the first two in id order) keep
    their label, us-2's two gangs (NotInitialized, Scheduling) are counted under other, and
    its storm gang is labelled by its key."""
    got = samples(requests.get(fleet_served["base"] + "/metrics", timeout=10).text)

    def value(name: str, **labels: str) -> float | None:
        return got.get((name, tuple(sorted(labels.items()))))

    koord = "koord-scheduler"
    assert {dict(labels)["cluster"] for (n, labels) in got if n == "gangstate_gangs"} == {
        "default", "eu-1", "other"}
    assert value("gangstate_gangs", cluster="default", phase="Gathering", scheduler=koord) == 1
    assert value("gangstate_gangs", cluster="default", phase="Deleted", scheduler=koord) == 1
    assert value("gangstate_gangs", cluster="eu-1", phase="Finished", scheduler=koord) == 1
    assert value("gangstate_gangs", cluster="other", phase="NotInitialized",
                 scheduler=koord) == 1
    assert value("gangstate_gangs", cluster="other", phase="Scheduling", scheduler=koord) == 1
    assert value("gangstate_gangs", cluster="us-2", phase="Scheduling", scheduler=koord) is None
    # held at PreEnqueue: default's 2 pods (GangMembersInsufficient), us-2's 1 (GangNotInitialized)
    assert value("gangstate_pods_held_preenqueue", cluster="default",
                 reason="GangMembersInsufficient", scheduler=koord) == 2
    assert value("gangstate_pods_held_preenqueue", cluster="other",
                 reason="GangNotInitialized", scheduler=koord) == 1
    assert value("gangstate_scheduler_failed_events_per_minute", cluster="other",
                 gang="us-2:sc-b/gb") == 42
