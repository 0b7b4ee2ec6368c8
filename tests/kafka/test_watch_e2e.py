"""End to end: TEST API SERVER -> ``gangstate watch`` -> real Kafka -> ``gangstate worker`` ->
the expected diagnostics on the ``diagnostics`` topic.

The test API server is ``tests.doubles.apiserver`` (a test double, not a cluster). The broker and
the settings come from ``tests/conftest.py`` (``kafka_settings``: unique topic prefix and app
id, topics created); the worker runs as a child process (``streams.dev.worker_process``).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kafka import KafkaConsumer
from kubernetes import client

from streams.kafka.publishing import Publisher
from streams.kafka.reading import read_all
from producers.watch.watching import WatchConfig, Watcher
from streams.settings import Settings
from streams.dev.worker_process import running_worker
from tests.doubles.apiserver import ApiServerDouble
from tests.fixtures.builders import kube_pod

pytestmark = pytest.mark.kafka

GANG = "nlp/distill"
SECRET = "s3cr3t-hf-token"
"""An env value, a command argument and an annotation of the pods: never in gang-events."""


def _pod(name: str) -> dict[str, Any]:
    return kube_pod(name, "nlp", uid=None, rv=None, gang="distill", min_available=2,
                    mode="nonstrict", annotations={
                        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                            {"env": [{"name": "HF_TOKEN", "value": SECRET}]})},
                    containers=[{"name": "c", "command": ["train", f"--token={SECRET}"],
                                 "env": [{"name": "HF_TOKEN", "value": SECRET}],
                                 "resources": {"requests": {"nvidia.com/gpu": "1"}}}])


def _failed_scheduling(pod: dict[str, Any]) -> dict[str, Any]:
    meta = pod["metadata"]
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.fs", "namespace": "nlp"},
            "involvedObject": {"kind": "Pod", "namespace": "nlp", "name": meta["name"],
                               "uid": meta["uid"]},
            "reason": "FailedScheduling", "type": "Warning",
            "message": "0/8 nodes are available: 8 Insufficient nvidia.com/gpu.",
            "source": {"component": "koord-scheduler"},
            "lastTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _diagnostics(settings: Settings, want: set[str], timeout: float) -> dict[str, list[dict]]:
    consumer = KafkaConsumer(settings.topics.diagnostics, bootstrap_servers=settings.bootstrap,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=500)
    found: dict[str, list[dict]] = {}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not want <= set(found):
            for message in consumer:
                record = json.loads(message.value)
                if record.get("gang") == GANG:
                    found.setdefault(record["reason"], []).append(record)  # in order
    finally:
        consumer.close()
    return found


def test_test_apiserver_to_kafka_to_worker_diagnostics(kafka_settings: Settings) -> None:
    config = WatchConfig(watch_timeout=5, read_timeout=10.0, backoff_base=0.05, backoff_cap=0.5,
                         tick_interval=1.0, flush_interval=0.2)
    with ApiServerDouble() as server, running_worker(kafka_settings):
        publisher = Publisher(kafka_settings, client_id="gangstate-watch-test")
        watcher = Watcher(client.ApiClient(server.configuration()), publisher, kafka_settings,
                          config)
        watcher.start()
        try:
            assert watcher.synced(timeout=15)
            pods = [server.apply(_pod(f"distill-{i}")) for i in range(2)]
            # Pods and Events are separate watches: let both pods reach Kafka before the
            # scheduler's Event, as they would in a cluster (the Event follows a cycle that
            # can only start once the gang has its members).
            deadline = time.monotonic() + 30
            while watcher.metrics.value("gangstate_watch_records_published_total",
                                        schema="gangstate.kube/v1", resource="pods") < 2:
                assert time.monotonic() < deadline, "the two pods were never published"
                time.sleep(0.05)
            server.apply(_failed_scheduling(pods[0]))
            # the failure episode's GangUnschedulable is due 10 s of event time after the
            # failure: the watcher's ticks (1 s) move the worker's clock there
            found = _diagnostics(kafka_settings, {"GangSpecInvalid", "GangUnschedulable"},
                                 timeout=90)
        finally:
            watcher.stop()
            publisher.close()
    assert [d["facts"] for d in found["GangSpecInvalid"]] == [
        {"field": "mode", "value": "nonstrict", "effective": "Strict"}] * 2
    [unschedulable] = found["GangUnschedulable"]
    assert {k: unschedulable["facts"][k] for k in ("unfit", "fit", "rounds")} == {
        "unfit": {"distill-0": "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."},
        "fit": 0, "rounds": 1}
    # emitted when its facts first hold, i.e. with the first pod (facts do not change after),
    # then sent again to the second pod when it joins
    assert [[i["name"] for i in d["involved"]] for d in found["GangSpecInvalid"]] == [
        ["distill-0"], ["distill-1"]]
    assert {i["name"] for i in unschedulable["involved"]} == {
        "distill-0", "distill-1"}
    assert watcher.metrics.value("gangstate_watch_records_published_total",
                                 schema="gangstate.cycle/v1", resource="") == 1
    # the pods' env values, command and manifest stayed out of gang-events (issue 15), and the
    # worker still found everything it needed in the published shape (the diagnostics above)
    topic = kafka_settings.topics.gang_events
    published = read_all(kafka_settings, [topic])[topic]
    pods = [r for r in published if r.get("resource") == "pods"]
    assert len(pods) == 2
    # a pod's spec carries only what the fold reads: its scheduler (NG1), no containers
    assert all(set(r["object"]["spec"]) == {"schedulerName"} for r in pods)
    assert not [r for r in published if SECRET in json.dumps(r)]


# -- failing clean (issue 21): the API server refuses the watch, or cannot be reached ---------

def _kubeconfig(tmp_path: Any, server: str) -> str:
    from tests.unit.test_fail_clean import kubeconfig_of

    return kubeconfig_of(tmp_path, server)


def _env(settings: Settings) -> dict[str, str]:
    return {"KAFKA_BOOTSTRAP_SERVERS": settings.bootstrap or "",
            "GANGSTATE_TOPIC_PREFIX": settings.topics.prefix}


def test_a_watch_forbidden_to_list_pods_exits_1_with_one_line(kafka_settings: Settings,
                                                              tmp_path: Any) -> None:
    from tests.unit.test_fail_clean import gangstate

    with ApiServerDouble() as server:
        server.allow_only([{"apiGroups": [""], "resources": ["events", "nodes"],
                            "verbs": ["list", "watch"]}])
        run = gangstate("watch", "--no-podgroups", "--no-native-podgroups", "--kubeconfig",
                        _kubeconfig(tmp_path, server.url), **_env(kafka_settings))
    assert "Traceback" not in run.stdout + run.stderr
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == (
        f"gangstate watch: the API server at {server.url} forbids listing pods (API group '') "
        f"cluster-wide (403 Forbidden); grant the watch's user or ServiceAccount list and "
        f"watch on it (deploy/kubernetes/rbac.yaml)")


def test_a_watch_waits_for_an_unreachable_api_server_and_says_so(kafka_settings: Settings,
                                                                 tmp_path: Any) -> None:
    import requests

    from tests.unit.test_fail_clean import Running, closed_port

    api, http = f"http://127.0.0.1:{closed_port()}", closed_port()
    proc = Running("watch", "--no-podgroups", "--http-port", str(http), "--kubeconfig",
                   _kubeconfig(tmp_path, api), **_env(kafka_settings))
    try:
        line = proc.wait_for(f": cannot reach the API server at {api} (")
        assert "(MaxRetryError: Failed to establish a new connection: [Errno 111] Connection " \
               "refused); retrying in " in line, line
        ready = requests.get(f"http://127.0.0.1:{http}/readyz", timeout=10)
        assert ready.status_code == 503
        assert ready.text.startswith(f"not ready: waiting for the API server at {api}: not "
                                     f"listed yet: ")
        status, lines = proc.stop()
    finally:
        proc.kill()
    assert status == 0 and "Traceback" not in "\n".join(lines)
