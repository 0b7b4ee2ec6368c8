"""Metrics on one flag for every long-running component, on loopback unless told otherwise
(issue 15): ``gangstate watch``, ``sink`` and ``worker`` each serve ``/metrics`` with
``--http-port PORT``, listening on 127.0.0.1 by default (before: ``watch`` and ``sink``
listened on 0.0.0.0, every interface) and on the address ``--http-bind`` names.

Each component runs as a real process. "Not listening there" is checked by connecting to the
same port on another loopback address (127.0.0.2), which a server bound to 0.0.0.0 would
answer.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from streams.settings import Settings
from tests.kafka.test_worker_routing import free_port_on_both

pytestmark = pytest.mark.kafka

# component -> (its arguments besides the HTTP flags, a metric only it serves, its /readyz
# once it has served /metrics: (status, text), or only the status when it may still change)
COMPONENTS = {
    # Kafka unreachable: the watch retries it with backoff and serves its metrics meanwhile
    "watch": (["watch", "--bootstrap", "127.0.0.1:1", "--kubeconfig", "{kubeconfig}"],
              "gangstate_watch_queue_depth",
              (503, "not ready: waiting for Kafka at 127.0.0.1:1 (--bootstrap)\n")),
    "sink": (["sink", "--dry-run"], "gangstate_sink_api_forbidden", (200, "ready\n")),
    "worker": (["worker"], "gangstate_records", (200, "ready\n")),
}
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:2"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


def refused(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


@pytest.mark.parametrize("bind", [None, "127.0.0.2"])
@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_metrics_on_http_port_at_the_bind_address(component: str, bind: str | None,
                                                  kafka_settings: Settings,
                                                  tmp_path: Path) -> None:
    args, metric, ready = COMPONENTS[component]
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    args = [a.format(kubeconfig=tmp_path / "kubeconfig") for a in args]
    port = free_port_on_both()
    flags = ["--http-port", str(port)] + (["--http-bind", bind] if bind else [])
    served, other = (bind or "127.0.0.1"), ("127.0.0.1" if bind else "127.0.0.2")
    env = dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=kafka_settings.bootstrap or "",
               GANGSTATE_TOPIC_PREFIX=kafka_settings.topics.prefix,
               GANGSTATE_APP_ID=kafka_settings.app_id, GANGSTATE_DATA_DIR=str(tmp_path))
    env.pop("POD_IP", None)
    log = tmp_path / "out.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "streams.cli", *args, *flags], env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                answer = requests.get(f"http://{served}:{port}/metrics", timeout=2)
                # (the worker answers an empty registry while it waits for Kafka)
                if answer.status_code == 200 and metric in answer.text:
                    break
            except requests.ConnectionError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.3)
        assert metric in answer.text
        # /readyz: 503 while it waits; the worker and the sink reach Kafka, then say ready
        while True:
            got = requests.get(f"http://{served}:{port}/readyz", timeout=2)
            if (got.status_code, got.text) == ready or ready[0] != 200:
                break
            assert got.status_code == 503 and got.text.startswith("not ready: ")
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.3)
        assert (got.status_code, got.text) == ready
        assert refused(other, port), f"{component} also listens on {other}:{port}"
        # the start line once Kafka answered (a new user's sink said nothing at all)
        t = kafka_settings.topics
        started = {"sink": f"; writing the diagnostics of {t.diagnostics} as core/v1 Events "
                           f"(consumer group {kafka_settings.app_id}-event-sink)",
                   "worker": f"gangstate worker: folding {t.gang_events} at "}.get(component)
        while started is not None and started not in log.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.3)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
