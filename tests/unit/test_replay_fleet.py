"""Traces and dumps of a cluster in a fleet (issue 27, docs/fleet.md): ``--cluster`` of
``gangstate replay`` and ``gangstate fold`` gives the records that name no cluster (a cluster
dump's, an old trace's) that cluster; a record that names one keeps it; without the flag (or
with ``default``) nothing changes, byte for byte. A replay keys each record within its cluster,
and a core/v1 Event by the gang of its involved pod *in the same cluster*.

The replay publishes through an in-memory publisher (no broker); values worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from producers.replay import file_lines, replay
from producers.watch.dump import trace_lines
from streams.cli import main
from streams.core.timefmt import parse_time
from streams.settings import Settings, Topics
from streams.wire.traces import fold_lines
from tests.fixtures.builders import kube_pod
from tests.unit.test_dump import dump

CASES = Path(__file__).resolve().parents[1] / "cases"
TRACE = CASES / "insufficient-members" / "trace.jsonl"
SETTINGS = Settings(bootstrap="127.0.0.1:1", topics=Topics("test."))
AT = parse_time("2026-11-02T09:04:00Z")


class Recorder:
    """``Publisher`` as ``replay`` uses it: sends and ticks, recorded."""

    def __init__(self) -> None:
        self.sent: list[tuple[str | None, bytes]] = []
        self.ticks: list[tuple[int, str | None]] = []

    def send(self, topic: str, key: str | None, value: bytes,
             partition: int | None = None) -> None:
        self.sent.append((key, value))

    def tick_all_partitions(self, at_micros: int, cluster: str | None = None) -> int:
        self.ticks.append((at_micros, cluster))
        return 8

    def flush(self) -> None:
        pass


def replayed(paths: list[Path], cluster: str = "default", reader: Any = trace_lines,
             at: int | None = AT) -> Recorder:
    publisher = Recorder()
    report = replay(file_lines(paths, reader), SETTINGS, at=at, publisher=publisher,  # type: ignore[arg-type]
                    cluster=cluster)
    assert report.malformed == []
    return publisher


def test_a_replay_in_default_publishes_the_trace_unchanged() -> None:
    publisher = replayed([TRACE])
    raw = [line.strip() for line in TRACE.read_bytes().splitlines() if line.strip()]
    assert [value for _, value in publisher.sent] == raw
    assert {key for key, _ in publisher.sent} == {"team-a/llm-pretrain"}
    assert publisher.ticks == [(AT, None)]  # ticked as before fleets


def test_a_replay_with_cluster_stamps_keys_and_ticks_within_it() -> None:
    publisher = replayed([TRACE], cluster="eu-1")
    raw = [json.loads(line) for line in TRACE.read_bytes().splitlines() if line.strip()]
    sent = [(key, json.loads(value)) for key, value in publisher.sent]
    assert [record for _, record in sent] == [{**r, "cluster": "eu-1"} for r in raw]
    assert {key for key, _ in sent} == {"eu-1:team-a/llm-pretrain"}
    assert publisher.ticks == [(AT, "eu-1")]


def kube(obj: dict[str, Any], when: str, cluster: str | None) -> str:
    record = {"schema": "gangstate.kube/v1", "observed_at": when, "type": "ADDED",
              "resource": "events" if obj["kind"] == "Event" else "pods", "object": obj}
    return json.dumps({**record, **({"cluster": cluster} if cluster else {})})


def pod_event(pod: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{pod}.1", "namespace": "team-a", "uid": f"ev-{pod}"},
            "involvedObject": {"kind": "Pod", "namespace": "team-a", "name": pod},
            "reason": "Pulled", "message": "pulled", "type": "Normal"}


def test_an_event_is_keyed_by_the_gang_of_its_pod_in_its_own_cluster(tmp_path: Path) -> None:
    """Pod team-a/p-0 is of gang ``a`` in eu-1 and of gang ``b`` in us-2 (two clusters, two
    pods of one name); an Event of team-a/p-0 goes to the gang of the pod in the Event's
    cluster, whatever cluster's pod was seen last. A record without cluster is of --cluster
    (eu-1 here); the ones naming us-2 keep it."""
    trace = tmp_path / "fleet.jsonl"
    trace.write_text("\n".join([
        kube(kube_pod("p-0", "team-a", gang="a", min_available=1), "2026-11-02T09:00:00Z", None),
        kube(kube_pod("p-0", "team-a", gang="b", min_available=1), "2026-11-02T09:00:01Z",
             "us-2"),
        kube(pod_event("p-0"), "2026-11-02T09:00:02Z", None),
        kube(pod_event("p-0"), "2026-11-02T09:00:03Z", "us-2"),
    ]) + "\n")
    publisher = replayed([trace], cluster="eu-1")
    sent = [(key, json.loads(value)["cluster"]) for key, value in publisher.sent]
    assert sent == [("eu-1:team-a/a", "eu-1"), ("us-2:team-a/b", "us-2"),
                    ("eu-1:team-a/a", "eu-1"), ("us-2:team-a/b", "us-2")]
    # without --cluster: the unnamed records are default's, keyed by the bare gang id
    publisher = replayed([trace])
    assert [key for key, _ in publisher.sent] == ["team-a/a", "us-2:team-a/b", "team-a/a",
                                                  "us-2:team-a/b"]


def test_a_dump_read_for_a_cluster_gives_its_records_that_cluster(tmp_path: Path) -> None:
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(dump()))
    bare = [json.loads(raw) for _, raw in trace_lines(path)]
    eu = [json.loads(raw) for _, raw in trace_lines(path, "eu-1")]
    assert bare and all("cluster" not in r for r in bare)
    assert eu == [{**r, "cluster": "eu-1"} for r in bare]
    assert [raw for _, raw in trace_lines(path, "default")] == [
        raw for _, raw in trace_lines(path)]
    publisher = replayed([path], cluster="eu-1", at=None)
    assert {key for key, _ in publisher.sent} == {"eu-1:ml/train"}
    assert publisher.ticks == []


def test_fold_of_a_dump_with_cluster_keys_its_gangs_within_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(dump()))
    assert main(["fold", str(path), "--cluster", "eu-1", "--at", "2026-12-01T10:05:00Z",
                 "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["gangs"]) == ["eu-1:ml/train"]
    assert out["diagnostics"] and all(d["cluster"] == "eu-1" for d in out["diagnostics"])
    assert main(["fold", str(path), "--at", "2026-12-01T10:05:00Z", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["gangs"]) == ["ml/train"]
    assert all("cluster" not in d for d in out["diagnostics"])


def test_fold_of_a_trace_keeps_the_clusters_its_records_name(tmp_path: Path) -> None:
    """Two clusters' records in one trace: each gang in its own cluster; --cluster only
    gives a cluster to the records that name none."""
    trace = tmp_path / "two.jsonl"
    lines = TRACE.read_bytes().splitlines()
    trace.write_bytes(b"\n".join(
        [line for line in lines if line.strip()]
        + [json.dumps({**json.loads(line), "cluster": "us-2"}).encode()
           for line in lines if line.strip()]) + b"\n")
    gangs = set(fold_lines(list(trace_lines(trace)), AT).states)
    assert gangs == {"team-a/llm-pretrain", "us-2:team-a/llm-pretrain"}
    gangs = set(fold_lines(list(trace_lines(trace, "eu-1")), AT).states)
    assert gangs == {"eu-1:team-a/llm-pretrain", "us-2:team-a/llm-pretrain"}


def test_fold_and_replay_do_not_read_gangstate_cluster(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A recorded trace stays of ``default`` whatever ``GANGSTATE_CLUSTER`` the shell has
    (it names the cluster a watch, a sink or a query serves): only --cluster re-homes it."""
    monkeypatch.setenv("GANGSTATE_CLUSTER", "eu-1")
    assert main(["fold", str(TRACE), "--at", "2026-11-02T09:04:00Z", "-o", "json"]) == 0
    assert list(json.loads(capsys.readouterr().out)["gangs"]) == ["team-a/llm-pretrain"]
    from click.testing import CliRunner

    from streams.cli import cli

    result = CliRunner().invoke(cli, ["replay", "--help"])
    assert "--cluster CLUSTER" in result.output and "$GANGSTATE_CLUSTER is not" in result.output
