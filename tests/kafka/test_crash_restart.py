"""Workers killed with SIGKILL (no graceful shutdown: no flush, no commit, no leave-group) in
the middle of their input, each replaced by a new worker on the same app id and topics: the gang
table the last one finishes with equals the offline fold of the whole log, per gang, and every
diagnostic and command id of the offline fold is in the output topics (at least once: records
after the last committed offset are processed again, so repeats are allowed).

The worker writes changed gangs to the table's changelog only when Faust starts an offset commit
(``streams.worker.app._FlushBeforeCommit``). A committed offset whose gangs never reached the changelog
loses those records' effects for good (they are not processed again), and the final table
differs from the offline fold. Each kill comes after the worker's first commit, at a random
moment of a commit interval, while input is still arriving (the seed is in failure messages).

Faust's consumer session is shortened (``BROKER_SESSION_TIMEOUT``, Faust's own environment
setting; 6 s, the broker's default minimum) so that a new worker waits about 6 s, not Faust's
default 60 s, for the group coordinator to give up on the killed member.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Callable

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from bench.synthetic import trace
from producers.replay import merged_by_time, replay
from streams.settings import Settings
from streams.wire.contracts import parse_time
from streams.core.state import from_wire, summary
from streams.dev.worker_process import running_worker
from tests.fixtures.casecheck import handed_case_dirs, recorded_case_dirs
from tests.fixtures.throughkafka import caught_up, log_tail, offline, worker_run

pytestmark = pytest.mark.kafka
AT = parse_time("2026-12-02T13:55:00Z")
"""After the last case (the recorded network topology case ends at 2026-12-02T13:50), not ahead
of the wall clock."""
GANGS, MEMBERS = 96, 4
"""Synthetic gangs (``bench/synthetic.py``): about 4.7k records, 3.8 MiB."""
COMMIT_INTERVAL = 2.8
"""Faust's default ``broker_commit_interval``, seconds."""
LIVE_SECONDS = 6.0
"""How long each live part of the input takes to publish (longer than the first commit plus
the largest random delay, so the kill lands while records still arrive)."""


def _lines() -> list[tuple[str, int, bytes]]:
    """The synthetic trace (event time 2026-10-26) followed by the handed cases and the recorded
    gated representative (its one command) merged by time (2026-11-02, 2026-12-01): one log in
    event-time order."""
    synthetic = [("synthetic", n, value) for n, (_key, value)
                 in enumerate(trace(GANGS, MEMBERS, shape="legacy"), start=1)]
    cases = handed_case_dirs() + [c for c in recorded_case_dirs()
                                  if c.name == "shim-gated-representative"]
    return synthetic + merged_by_time([case / "trace.jsonl" for case in cases])


class _Progress:
    """Committed offsets of the worker's consumer group on ``gang-events``, and end offsets."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.admin = KafkaAdminClient(bootstrap_servers=settings.bootstrap,
                                      client_id="crash-test")
        self.consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None)
        self.tps = [TopicPartition(settings.topics.gang_events, p)
                    for p in range(settings.partitions)]

    def committed(self) -> int:
        try:
            offsets = self.admin.list_group_offsets({self.settings.app_id: self.tps}).get(
                self.settings.app_id, {})
        except KafkaError:
            return 0
        return sum(o.offset for o in offsets.values() if o is not None and o.offset > 0)

    def end(self, topic: str | None = None) -> int:
        topic = topic or self.settings.topics.gang_events
        return sum(self.consumer.end_offsets(
            [TopicPartition(topic, p) for p in range(self.settings.partitions)]).values())

    def close(self) -> None:
        self.consumer.close()
        self.admin.close()


class _Live(threading.Thread):
    """Publishes ``lines`` over about ``LIVE_SECONDS`` (then one tick per partition at ``at``)."""

    def __init__(self, settings: Settings, lines: list[tuple[str, int, bytes]],
                 at: int | None = None) -> None:
        super().__init__(daemon=True)
        self.settings, self.lines, self.at = settings, lines, at
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            replay(self.lines, self.settings, rate=len(self.lines) / LIVE_SECONDS, at=self.at)
        except BaseException as err:  # reported by the test
            self.error = err


def _kill_mid_stream(settings: Settings, log: Path, progress: _Progress, live: _Live,
                     rng: random.Random, *, at_commit: bool) -> str:
    """Start a worker; once it has committed (its first commit), start publishing ``live``,
    wait a random part of a commit interval and SIGKILL the worker's process group while
    ``live`` still publishes; with ``at_commit``, wait for the next commit after that and kill
    as soon as it is seen (when the changelog writes of that commit may still be in flight).
    Returns what the moment looked like (for failure messages)."""
    start = progress.committed()
    moment = ""

    def check(worker_alive: Callable[[], bool]) -> None:
        assert worker_alive(), log.read_text(errors="replace")[-2000:]
        assert time.monotonic() < deadline, f"no commit after 60 s\n{log.read_text()[-2000:]}"

    try:
        # ready_timeout=None: the group still looks Stable with the killed member in it, so
        # running_worker's readiness check would pass at once; the first commit is the sign.
        with running_worker(settings, log_path=log, ready_timeout=None) as worker:
            deadline = time.monotonic() + 60
            while progress.committed() <= start:
                check(lambda: worker.poll() is None)
                time.sleep(0.05)
            live.start()
            delay = rng.uniform(0.2, 1.5 if at_commit else COMMIT_INTERVAL)
            time.sleep(delay)
            if at_commit:
                before = progress.committed()
                while progress.committed() == before:
                    check(lambda: worker.poll() is None and live.is_alive())
                os.killpg(worker.pid, signal.SIGKILL)
            committed, end = progress.committed(), progress.end()
            outputs = progress.end(settings.topics.diagnostics)
            still_live = live.is_alive()
            if not at_commit:
                os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
            moment = (f"killed {'at the first commit after ' if at_commit else ''}"
                      f"{delay:.2f} s into live input, {committed} of {end} published "
                      f"records committed, {outputs} diagnostics out")
            assert still_live and committed < end and outputs > 0, \
                f"not in the middle of the input: {moment}"
    except RuntimeError as err:  # running_worker: "worker exited early" (the SIGKILL)
        if "exited early" not in str(err):
            raise
    live.join(60)
    assert not live.is_alive() and live.error is None, live.error
    return moment


def test_sigkill_mid_stream_then_restart_equals_the_offline_fold(
        kafka_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_SESSION_TIMEOUT", "6")
    monkeypatch.setenv("BROKER_HEARTBEAT_INTERVAL", "1")
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    lines = _lines()
    expected = offline(lines, AT)
    cut1, cut2 = int(len(lines) * 0.4), int(len(lines) * 0.7)
    replay(lines[:cut1], kafka_settings)  # a backlog waits for the first worker

    progress = _Progress(kafka_settings)
    try:
        # 1: folds a backlog, commits, killed at a random moment while live input arrives;
        # 2: recovers the table, folds what 1 left uncommitted, killed during more live input
        #    as soon as a commit is seen;
        # 3: recovers again and runs to the end.
        first = _kill_mid_stream(kafka_settings, tmp_path / "first.log", progress,
                                 _Live(kafka_settings, lines[cut1:cut2]), rng,
                                 at_commit=False)
        second = _kill_mid_stream(kafka_settings, tmp_path / "second.log", progress,
                                  _Live(kafka_settings, lines[cut2:], at=AT), rng,
                                  at_commit=True)
    finally:
        progress.close()
    context = f"seed {seed}; first worker {first}; second worker {second}"

    log = tmp_path / "third.log"
    with worker_run(kafka_settings, log, ready_timeout=None) as run:
        caught_up(kafka_settings, run.alive, 90, lambda: context + "\n" + log_tail(log, 2000))
        t = kafka_settings.topics
        got = run.read()
        table = run.table()

    assert got[t.dead_letters] == [], context
    assert sorted(table) == sorted(expected.states), context
    differ = {gang: (summary(from_wire(table[gang])), summary(state))
              for gang, state in expected.states.items()
              if summary(from_wire(table[gang])) != summary(state)}
    assert differ == {}, f"{context}: {len(differ)} gangs differ from the offline fold"
    diagnostics = {d["id"] for d in got[t.diagnostics]}
    commands = {c["id"] for c in got[t.commands]}
    missing = ([d["id"] for d in expected.diagnostics if d["id"] not in diagnostics]
               + [c["id"] for c in expected.commands if c["id"] not in commands])
    assert missing == [], f"{context}: {len(missing)} outputs missing: {missing[:5]}"
    assert len(expected.diagnostics) > GANGS and expected.commands
