"""The Event sink of one cluster in a fleet (issue 27, docs/fleet.md): it writes the diagnostics
of its own cluster (``cluster``; absent = ``default``) to its API server and skips every other
one without error, counted as ``skipped{reason="other-cluster"}``; each cluster's sink has a
consumer group of its own (sinks of two clusters in one group would split the partitions and
each would miss its own cluster's diagnostics on the other's).

Diagnostics are those of a handed case folded offline, as the ``default`` cluster and as
``eu-1`` (``gangstate fold --cluster eu-1``); Events are written to the TEST API SERVER."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from producers.watch.dump import trace_lines
from streams.events.sink import SinkOptions, consume, group_id
from streams.settings import Settings
from streams.wire.traces import fold_lines
from tests.doubles.apiserver import ApiServerDouble
from tests.unit.test_event_sink import AT, CASES, EXPECTED, make_sink, summary, writes

CASE = "insufficient-members"


def diagnostics_in(cluster: str, case: str = CASE) -> list[dict[str, Any]]:
    """The case's diagnostics with its records of ``cluster`` (``default``: as recorded)."""
    result = fold_lines(list(trace_lines(CASES / case / "trace.jsonl", cluster)), AT)
    assert not result.errors
    return result.diagnostics


@pytest.fixture
def server() -> Iterator[ApiServerDouble]:
    with ApiServerDouble() as s:
        yield s


def test_the_folded_diagnostics_name_their_cluster_outside_default_only() -> None:
    default, eu = diagnostics_in("default"), diagnostics_in("eu-1")
    assert len(default) == len(eu) == 2
    assert all("cluster" not in d for d in default)
    assert all(d["cluster"] == "eu-1" and d["id"].startswith("eu-1:team-a/llm-pretrain#")
               for d in eu)


def test_a_sink_writes_its_own_clusters_diagnostics_and_skips_the_others(
        server: ApiServerDouble) -> None:
    sink = make_sink(server, cluster="eu-1")
    for diagnostic in diagnostics_in("default") + diagnostics_in("us-2"):
        assert sink.write(diagnostic) == []
    assert server.requests == []  # not even a GET: nothing of another cluster reaches the API
    assert sink.metrics.value("skipped", "other-cluster") == 4
    for diagnostic in diagnostics_in("eu-1"):
        sink.write(diagnostic)
    (posts, patches), rows = EXPECTED[CASE]
    assert summary(server.objects("events")) == rows  # the Events of the case, as in default
    assert writes(server) == (posts, patches) == (7, 0)
    assert sink.metrics.value("skipped", "other-cluster") == 4


def test_the_default_sink_writes_diagnostics_without_a_cluster_and_skips_eu_1s(
        server: ApiServerDouble) -> None:
    sink = make_sink(server)  # cluster default, as before fleets
    for diagnostic in diagnostics_in("eu-1"):
        assert sink.write(diagnostic) == []
    assert sink.metrics.value("skipped", "other-cluster") == 2 and server.requests == []
    for diagnostic in diagnostics_in("default"):
        sink.write(diagnostic)
    assert writes(server) == (7, 0)


def test_a_kafka_value_of_another_cluster_is_skipped_not_invalid(
        server: ApiServerDouble) -> None:
    sink = make_sink(server)
    (first, _) = diagnostics_in("eu-1")
    assert sink.write_raw(json.dumps(first).encode()) == []
    assert sink.metrics.value("skipped", "other-cluster") == 1
    assert sink.metrics.value("dropped", "invalid-diagnostic") == 0
    # the same value without its cluster is default's: written
    (bare, _) = diagnostics_in("default")
    assert len(sink.write_raw(json.dumps(bare).encode())) == 3  # its three pods


@pytest.mark.parametrize("cluster, group", [
    ("default", "gangstate-event-sink"),  # unchanged: a sink upgraded in place resumes
    ("eu-1", "gangstate-event-sink-eu-1"),
    ("us-2", "gangstate-event-sink-us-2"),
])
def test_each_clusters_sink_has_a_consumer_group_of_its_own(cluster: str, group: str) -> None:
    assert group_id(Settings(cluster=cluster)) == group
    assert group_id(Settings(app_id="gs-prod", cluster=cluster)) == group.replace(
        "gangstate", "gs-prod", 1)


class FakeConsumer:
    """kafka-python's ``KafkaConsumer`` as ``consume`` uses it: the group it joins, recorded."""

    joined: list[tuple[tuple[str, ...], str]] = []

    def __init__(self, *topics: str, **config: Any) -> None:
        FakeConsumer.joined.append((topics, config["group_id"]))

    def poll(self, **_: Any) -> dict[Any, Any]:
        return {}

    def commit(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_two_clusters_sinks_consume_in_two_groups(monkeypatch: pytest.MonkeyPatch,
                                                  server: ApiServerDouble) -> None:
    import kafka

    monkeypatch.setattr(kafka, "KafkaConsumer", FakeConsumer)
    FakeConsumer.joined = []
    stop = threading.Event()
    stop.set()  # join, then end at once
    for cluster in ("eu-1", "us-2", "default"):
        settings = Settings(bootstrap="127.0.0.1:1", cluster=cluster)
        assert consume(settings, make_sink(server, cluster=cluster), stop) == 0
    assert FakeConsumer.joined == [
        (("gangstate.diagnostics",), "gangstate-event-sink-eu-1"),
        (("gangstate.diagnostics",), "gangstate-event-sink-us-2"),
        (("gangstate.diagnostics",), "gangstate-event-sink")]


def test_the_sinks_cluster_comes_from_the_flag_else_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GANGSTATE_CLUSTER", raising=False)
    assert SinkOptions().settings().cluster == "default"
    monkeypatch.setenv("GANGSTATE_CLUSTER", "us-2")
    assert SinkOptions().settings().cluster == "us-2"
    assert SinkOptions(cluster="eu-1").settings().cluster == "eu-1"


def test_sink_input_of_several_clusters_writes_only_its_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``gangstate sink --dry-run --input``: the diagnostics of ``eu-1`` and ``default`` in
    one file; the ``eu-1`` sink prints the creates of eu-1's three pods, then four, and the
    default one those of default's; exit 0 (a diagnostic of another cluster is not invalid)."""
    from streams.cli import main

    monkeypatch.delenv("GANGSTATE_CLUSTER", raising=False)
    mixed = tmp_path / "d.jsonl"
    both = diagnostics_in("eu-1") + diagnostics_in("default")
    mixed.write_text("".join(json.dumps(d) + "\n" for d in both))
    for cluster in ("eu-1", None):
        argv = ["sink", "--dry-run", "--input", str(mixed), "--instance", "x"]
        assert main(argv + (["--cluster", cluster] if cluster else [])) == 0
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [line["verb"] for line in lines] == ["create"] * 7
    monkeypatch.setenv("GANGSTATE_CLUSTER", "us-2")  # a cluster with none of them
    assert main(["sink", "--dry-run", "--input", str(mixed)]) == 0
    assert capsys.readouterr().out == ""
