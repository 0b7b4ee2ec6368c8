"""The watch producer of one cluster in a fleet (issue 27, docs/fleet.md): outside ``default``
every record it publishes (kube records of pods, PodGroups and Events; cycle records of the
scheduler's Events and of the pods' conditions; capacity and preemption records; dead letters;
ticks) carries ``"cluster"`` and is keyed ``<cluster>:<gang id>``; in ``default`` the records
are those of a watch before fleets, byte for byte.

The shell runs against the TEST API SERVER (``tests.doubles.apiserver``) with the in-memory
publisher of ``test_watch``, twice over the same story (one cluster as ``eu-1``, once as
``default``), with one injected clock so that the two runs can be compared record by record.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Iterator

import click
import pytest
from kubernetes import client

from producers.clusters import InCluster, for_cluster, in_cluster, line_in_cluster
from producers.watch.running import WatchOptions, cluster_words
from producers.watch.watching import WatchConfig, Watcher
from streams.core.timefmt import parse_time
from streams.kafka.publishing import Publisher
from streams.settings import Settings, Topics
from streams.wire.decoding import decode_input
from streams.wire.traces import fold_lines
from tests.doubles.apiserver import ApiServerDouble, eventually
from tests.fixtures.builders import kube_pod
from tests.unit.test_watch import FAST, MemoryPublisher

AT = parse_time("2026-11-02T09:00:30Z")
CREATED = "2026-11-02T09:00:00Z"
GPU = "nvidia.com/gpu"
SHORT = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
WITH_CAPACITY = replace(FAST, capacity=True)


def settings(cluster: str = "default") -> Settings:
    return Settings(bootstrap=None, topics=Topics("test."), cluster=cluster)


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "creationTimestamp": CREATED},
            "spec": {}, "status": {"allocatable": {"cpu": "8", GPU: "1"}}}


def member(name: str, **kw: Any) -> dict[str, Any]:
    return kube_pod(name, "team-a", uid=f"uid-{name}", rv=None, gang="train", min_available=2,
                    gpu="1", created=CREATED, **kw)


def event(name: str, involved: dict[str, Any], reason: str, message: str,
          ns: str = "team-a") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}",
                         "creationTimestamp": "2026-11-02T09:00:10Z"},
            "involvedObject": {"kind": "Pod", **involved}, "reason": reason,
            "message": message, "type": "Warning" if reason == "FailedScheduling" else "Normal",
            "source": {"component": "koord-scheduler"}, "lastTimestamp": "2026-11-02T09:00:10Z",
            "count": 1}


def schemas(publisher: MemoryPublisher, topic: str = "test.gang-events") -> list[str]:
    """The schemas of what was sent to ``topic``; a cycle record's with its source's kind
    (``event`` or ``condition``)."""
    return [r["schema"] + (f":{r['source'].get('kind', 'event')}"
                           if r["schema"] == "gangstate.cycle/v1" else "")
            for _, r in publisher.on(topic)]


def story(server: ApiServerDouble, cluster: str) -> MemoryPublisher:
    """One cluster's story through a watch of ``cluster``: node gpu-1 (1 GPU) holds victim
    low/v-0 of another scheduler; gang team-a/train (w-0 bound nowhere, w-1, 1 GPU each) and
    PodGroup vision/resnet exist before the watch starts. Then w-1 fails with the GPU short
    (a FailedScheduling Event, then its PodScheduled condition), node gpu-2 joins (the room
    changes: a capacity record), v-0 is preempted by w-0 (a preemption record), and an Event
    names no pod (a dead letter). Every step is waited for, so both runs see one order; every
    object has its creationTimestamp (else the double's wall clock would differ between runs)."""
    server.apply(node("gpu-1"))
    server.apply(kube_pod("v-0", "low", uid="uid-v-0", rv=None, scheduler=None, node="gpu-1",
                          gpu="1", phase="Running", grace=30, created=CREATED))
    server.apply(member("w-0"))
    server.apply(member("w-1"))
    server.apply({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                  "metadata": {"name": "resnet", "namespace": "vision", "uid": "uid-pg",
                               "creationTimestamp": CREATED},
                  "spec": {"minMember": 2}})
    publisher = MemoryPublisher()
    watcher = Watcher(client.ApiClient(server.configuration()), publisher, settings(cluster),
                      WITH_CAPACITY, clock=lambda: AT).start()
    try:
        assert watcher.synced(timeout=10)
        eventually(lambda: len(schemas(publisher)) == 3)  # w-0, w-1, the PodGroup
        w1 = {"namespace": "team-a", "name": "w-1", "uid": "uid-w-1"}
        server.apply(event("w-1.fs", w1, "FailedScheduling", SHORT))
        eventually(lambda: "gangstate.cycle/v1:event" in schemas(publisher))
        server.apply(member("w-1", conditions=[{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": SHORT, "lastTransitionTime": "2026-11-02T09:00:11Z"}]))
        eventually(lambda: "gangstate.cycle/v1:condition" in schemas(publisher))
        server.apply(node("gpu-2"))
        eventually(lambda: "gangstate.capacity/v1" in schemas(publisher))
        server.apply(event("v-0.pre", {"namespace": "low", "name": "v-0", "uid": "uid-v-0"},
                           "Preempted", "Preempted by pod uid-w-0 on node gpu-1", ns="low"))
        eventually(lambda: "gangstate.preemption/v1" in schemas(publisher))
        server.apply(event("nobody.fs", {"namespace": "team-a", "name": ""},
                           "FailedScheduling", "0/1 nodes are available"))
        eventually(lambda: publisher.on("test.dead-letters"))
    finally:
        watcher.stop()
    return publisher


@pytest.fixture
def server() -> Iterator[ApiServerDouble]:
    with ApiServerDouble(bookmark_interval=0.1) as s:
        yield s


@pytest.fixture
def second_server() -> Iterator[ApiServerDouble]:
    with ApiServerDouble(bookmark_interval=0.1) as s:
        yield s


WANTED = ["gangstate.kube/v1", "gangstate.cycle/v1:event", "gangstate.cycle/v1:condition",
          "gangstate.capacity/v1", "gangstate.preemption/v1"]


def test_outside_default_every_record_says_its_cluster_and_is_keyed_within_it(
        server: ApiServerDouble, second_server: ApiServerDouble) -> None:
    fleet = story(server, "eu-1")
    alone = story(second_server, "default")
    assert set(WANTED) <= set(schemas(fleet))  # every kind of record the watch makes
    gang_events = fleet.on("test.gang-events")
    keys = {key for key, _ in gang_events}
    assert keys == {"eu-1:team-a/train", "eu-1:vision/resnet"}
    assert all(record["cluster"] == "eu-1" for _, record in gang_events)
    [(letter_key, letter)] = fleet.on("test.dead-letters")
    assert letter_key is None and letter["cluster"] == "eu-1"
    assert letter["schema"] == "gangstate.dead-letter/v1"

    # in default: no cluster anywhere, bare keys; and the records are exactly eu-1's without
    # their cluster and key prefix (the watch stamps and keys, and changes nothing else)
    def bare(records: list[tuple[str, str | None, dict[str, Any]]]
             ) -> list[tuple[str, str | None, str]]:
        out = []
        for topic, key, record in records:
            if key is not None and key.startswith("eu-1:"):
                key = key[len("eu-1:"):]
            record = {k: v for k, v in record.items() if k != "cluster"}
            out.append((topic, key, json.dumps(record, sort_keys=True)))
        return sorted(out)

    assert all("cluster" not in record for _, _, record in alone.records)
    assert {key for _, key, _ in alone.records} == {"team-a/train", "vision/resnet", None}
    assert bare(fleet.records) == sorted(
        (t, k, json.dumps(r, sort_keys=True)) for t, k, r in alone.records)

    # what the worker makes of them: gangs keyed eu-1:<gang id>, nothing re-keyed
    lines = [(n, json.dumps(r).encode()) for n, (_, r) in enumerate(gang_events, start=1)]
    result = fold_lines(lines, AT)
    assert not result.errors
    assert set(result.states) == {"eu-1:team-a/train", "eu-1:vision/resnet"}
    assert all(decode_input(json.dumps(r)).key in (k, None) for k, r in gang_events)


def test_the_decoder_keys_a_stamped_record_as_the_watch_keyed_it() -> None:
    record = {"schema": "gangstate.kube/v1", "observed_at": "2026-11-02T09:00:00Z",
              "type": "ADDED", "resource": "pods", "object": member("w-0")}
    stamped = InCluster(MemoryPublisher(), "eu-1")
    stamped.send_json("test.gang-events", "team-a/train", record)
    [(key, sent)] = stamped.sink.on("test.gang-events")
    assert key == "eu-1:team-a/train" == decode_input(json.dumps(sent)).key
    assert sent == {**record, "cluster": "eu-1"}


class FakeProducer:
    """kafka-python's producer as ``Publisher`` uses it: partitions and sends, recorded."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, bytes, int | None]] = []

    def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2}

    def send(self, topic: str, key: bytes | None = None, value: bytes = b"",
             partition: int | None = None) -> None:
        self.sent.append((topic, key, value, partition))
        return None


def publisher_with(producer: FakeProducer) -> Publisher:
    publisher = Publisher.__new__(Publisher)
    publisher.settings, publisher.producer = settings(), producer
    publisher.sent, publisher.failed, publisher._futures = 0, 0, []
    return publisher


def test_ticks_carry_the_cluster_outside_default_only() -> None:
    producer = FakeProducer()
    publisher = publisher_with(producer)
    assert for_cluster(publisher, "default") is publisher
    assert for_cluster(publisher, "eu-1").tick_all_partitions(AT) == 3
    assert publisher.tick_all_partitions(AT) == 3
    values = [(p, v) for _, _, v, p in producer.sent]
    assert values == [
        (0, b'{"schema":"gangstate.tick/v1","observed_at":"2026-11-02T09:00:30.000000Z",'
            b'"cluster":"eu-1"}'),
        (1, b'{"schema":"gangstate.tick/v1","observed_at":"2026-11-02T09:00:30.000000Z",'
            b'"cluster":"eu-1"}'),
        (2, b'{"schema":"gangstate.tick/v1","observed_at":"2026-11-02T09:00:30.000000Z",'
            b'"cluster":"eu-1"}'),
        (0, b'{"schema":"gangstate.tick/v1","observed_at":"2026-11-02T09:00:30.000000Z"}'),
        (1, b'{"schema":"gangstate.tick/v1","observed_at":"2026-11-02T09:00:30.000000Z"}'),
        (2, b'{"schema":"gangstate.tick/v1","observed_at":"2026-11-02T09:00:30.000000Z"}')]
    assert all(key is None for _, key, _, _ in producer.sent)
    # a stamped tick is a tick to the decoder: the clock of its partition, no gang
    decoded = decode_input(values[0][1])
    assert decoded.key is None and decoded.record is not None
    # a sink with no ticks (the in-memory double) has none stamped either
    assert getattr(for_cluster(MemoryPublisher(), "eu-1"), "tick_all_partitions", None) is None


def test_stamping_keeps_a_cluster_a_record_names_and_changes_nothing_in_default() -> None:
    record = {"schema": "gangstate.tick/v1", "observed_at": "2026-11-02T09:00:00Z"}
    assert in_cluster(record, "default") is record
    assert in_cluster(record, "eu-1") == {**record, "cluster": "eu-1"}
    named = {**record, "cluster": "us-2"}
    assert in_cluster(named, "eu-1") is named
    raw = b'{"schema": "gangstate.tick/v1", "observed_at": "2026-11-02T09:00:00Z"}\n'
    assert line_in_cluster(raw, "default") is raw
    assert line_in_cluster(raw, "eu-1") == (
        b'{"schema":"gangstate.tick/v1","observed_at":"2026-11-02T09:00:00Z","cluster":"eu-1"}')
    assert line_in_cluster(b'{"cluster": "us-2"}', "eu-1") == b'{"cluster": "us-2"}'
    assert line_in_cluster(b"not json", "eu-1") == b"not json"
    assert line_in_cluster(b"[1]", "eu-1") == b"[1]"


def test_the_cluster_watched_comes_from_the_flag_else_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GANGSTATE_CLUSTER", raising=False)
    assert WatchOptions().settings().cluster == "default"
    monkeypatch.setenv("GANGSTATE_CLUSTER", "eu-2")
    assert WatchOptions().settings().cluster == "eu-2"
    assert WatchOptions(cluster="eu-1").settings().cluster == "eu-1"


def test_the_start_line_names_the_cluster_outside_default_only() -> None:
    assert cluster_words("default") == ""
    assert cluster_words("eu-1") == " as cluster eu-1 (records stamped, keys eu-1:<gang id>)"


@pytest.mark.parametrize("command", ["watch", "sink", "fold", "replay"])
def test_a_cluster_that_is_no_dns_label_is_a_usage_error(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    from streams.cli import main

    args = {"fold": ["fold", "x.jsonl"], "replay": ["replay", "x.jsonl"]}.get(command, [command])
    with pytest.raises(SystemExit) as done:
        main([*args, "--cluster", "EU_1"])
    assert done.value.code == 2
    assert "'EU_1' is not a DNS-1123 label" in capsys.readouterr().err


def test_a_bad_gangstate_cluster_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from streams.cli import main

    monkeypatch.setenv("GANGSTATE_CLUSTER", "-eu")
    assert main(["watch", "--bootstrap", "127.0.0.1:1", "--kubeconfig", "/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gangstate: GANGSTATE_CLUSTER='-eu': ")
    assert "is not a DNS-1123 label" in err and len(err.strip().splitlines()) == 1


def test_watch_and_sink_take_the_cluster_of_their_context(monkeypatch) -> None:
    """``--context`` names the kubeconfig context; with ``GANGSTATE_CLUSTER_CONTEXTS`` mapping
    it, the cluster id follows it (a new user's ``watch --context kind-eu`` stayed in
    ``default``); ``--cluster`` wins; a context the mapping misses is a usage error unless
    ``GANGSTATE_CLUSTER`` is set (then ``None``: that one); a bad mapping is one line
    (``SettingsError``)."""
    from streams.cli.options import cluster_of_context
    from streams.settings import SettingsError

    monkeypatch.setenv("GANGSTATE_CLUSTER_CONTEXTS", "kind-eu=eu-1,prod-us=us-2")
    monkeypatch.delenv("GANGSTATE_CLUSTER", raising=False)
    assert [cluster_of_context(c, ctx) for c, ctx in (
        (None, "kind-eu"), (None, "prod-us"), ("eu-9", "kind-eu"), ("eu-9", "other"),
        (None, None))] == ["eu-1", "us-2", "eu-9", "eu-9", None]
    # a context the mapping misses would put the cluster's records in default: refused
    with pytest.raises(click.UsageError, match="^--context other: GANGSTATE_CLUSTER_CONTEXTS "
                                               "maps kind-eu, prod-us only; map it, or give "
                                               "--cluster"):
        cluster_of_context(None, "other")
    monkeypatch.setenv("GANGSTATE_CLUSTER", "eu-3")  # chosen: the context is only a context
    assert cluster_of_context(None, "other") is None
    monkeypatch.delenv("GANGSTATE_CLUSTER")
    monkeypatch.setenv("GANGSTATE_CLUSTER_CONTEXTS", "kind-eu=EU")
    with pytest.raises(SettingsError, match="^GANGSTATE_CLUSTER_CONTEXTS='kind-eu=EU': "):
        cluster_of_context(None, "kind-eu")
