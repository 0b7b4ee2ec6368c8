"""A worker whose broker goes down writes a bounded number of log lines (issue 15): each kind
of error once per 10 s with the count of the repeats, not ~110 lines a second.

Uses a broker of its own (``deploy/kafka/broker.py``), stopped under the running worker.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from streams.dev.localkafka import broker_module
from streams.dev.worker_process import running_worker
from streams.kafka.publishing import ensure_topics
from streams.settings import Settings, Topics

pytestmark = pytest.mark.kafka

WINDOW = 12.0
"""Seconds of broker downtime whose log lines are counted (longer than the 10 s interval)."""


def test_a_worker_logs_a_bounded_rate_while_its_broker_is_down(tmp_path: Path) -> None:
    broker = broker_module().LocalKafka()
    try:
        bootstrap = broker.start(timeout=120)
        run = uuid.uuid4().hex[:10]
        settings = Settings(bootstrap=bootstrap, topics=Topics(f"down-{run}."),
                            app_id=f"gangstate-down-{run}")
        ensure_topics(settings)
        log = tmp_path / "worker.log"
        with running_worker(settings, log_path=log) as worker:
            time.sleep(1)
            broker.stop()
            time.sleep(1)  # the first line of each kind
            before = len(log.read_bytes().splitlines())
            time.sleep(WINDOW)
            lines = log.read_bytes().splitlines()[before:]
            assert worker.poll() is None
    finally:
        broker.stop()
    errors = [line for line in lines if b"[ERROR]" in line]
    # 6 kinds of error line seen while a broker is down (connect, metadata, fetch, heartbeat,
    # coordinator, leave group), each at most twice in 12 s: once, then once with its count
    assert len(errors) <= 12, b"\n".join(lines[:40]).decode(errors="replace")
    assert any(b"more like this in the last" in line for line in errors)
