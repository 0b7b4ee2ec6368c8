"""The watch back within seconds of an API server restart (issue 22).

Measured on the real control plane: right after a kube-apiserver restart the watch got ``403
... cannot watch resource "events"`` (the authorizer not warm yet), backed off 30 s, and
relisted pods on ``410 Gone`` only at +26 s. Now: a refusal, a server error or a refused
connection is retried on ``retry_delay``'s schedule (0.2 s doubling to 5 s, equal jitter); a
410 relists at once; a 403 that lasts ``refused_for`` seconds still ends the watch with one
line. The pure schedule is a table; the shell runs against the TEST API SERVER
(``tests.doubles.apiserver``), which can answer 403 and 410 on demand (the real restart is
the cluster tier's: ``tests/cluster/test_cluster_chain.py``).
"""

from __future__ import annotations

import logging
import re
import time

import pytest

from producers.watch.watching import WatchConfig, retry_delay
from tests.doubles.apiserver import ApiServerDouble, eventually
from tests.unit.test_watch import FAST, MemoryPublisher, pod, published_kube, run_watcher


SCHEDULE = [
    # name, attempt, rand, seconds
    ("first retry, least jitter", 0, 0.0, 0.1),
    ("first retry, most jitter", 0, 0.999, 0.1999),
    ("second", 1, 0.0, 0.2),
    ("third, half jitter", 2, 0.5, 0.6),
    ("fourth", 3, 0.0, 0.8),
    ("fifth: capped at 2 s, so 1-2", 4, 0.0, 1.0),
    ("capped for good (no overflow at attempt 40)", 40, 0.999, 1.999),
]


@pytest.mark.parametrize("name, attempt, rand, seconds", SCHEDULE)
def test_retry_schedule(name: str, attempt: int, rand: float, seconds: float) -> None:
    assert retry_delay(attempt, rand) == pytest.approx(seconds), name


def test_ten_failures_in_a_row_wait_at_most_15_s() -> None:
    """A restart of about 10 s (connection refused all along): the retries wait at most
    0.2 + 0.4 + 0.8 + 1.6 + 6 x 2 = 15 s for 10 of them and the last gap is at most 2 s;
    the old schedule (0.5 s doubling, full jitter, 30 s cap) could wait 15.5 s for its
    first five alone and 30 s between two."""
    worst = [retry_delay(a, 0.999999) for a in range(10)]
    assert sum(worst) == pytest.approx(15.0, abs=1e-4) and max(worst) < 2.0
    assert sum(retry_delay(a, 0.0) for a in range(10)) == pytest.approx(7.5)


SLOW = WatchConfig(**{**FAST.__dict__, "retry_base": 5.0, "retry_cap": 5.0})
"""Every retry waits 2.5-5 s: whatever comes within 2 s did not wait for one."""
DEFAULTS = WatchConfig(**{**FAST.__dict__, "backoff_base": 0.5, "backoff_cap": 30.0,
                          "retry_base": 0.2, "retry_cap": 2.0})
"""The shipped backoff of Kafka sends and retry schedule of the API server's streams."""


@pytest.fixture
def server():
    with ApiServerDouble(bookmark_interval=0.1) as s:
        yield s


def _relists(watcher) -> float:
    return watcher.metrics.value("gangstate_watch_relists_total", resource="pods")


def test_410_gone_relists_at_once_without_the_retry_schedule(server: ApiServerDouble) -> None:
    """Compacted history and an ERROR 410 into the open watch: the pods are listed again at
    once (SYNC), although every retry of this watcher would wait 2.5-5 s; nothing is lost
    (the pod created meanwhile is in the relist) and nothing is duplicated in the fold."""
    server.apply(pod("w-0"))
    publisher = MemoryPublisher()
    watcher = run_watcher(server, publisher, SLOW)
    try:
        eventually(lambda: server.open_watches("pods") == 2)  # koord-, default-scheduler
        server.pause_watches()
        server.apply(pod("w-1"))  # the watch never delivers it
        started = time.monotonic()
        server.compact(expire_watches=True)
        eventually(lambda: _relists(watcher) == 2, timeout=2.0)  # each pod stream
        server.resume_watches()
        eventually(lambda: ("team-a/train", "SYNC", "pods", "w-1") in published_kube(publisher),
                   timeout=2.0)
        assert time.monotonic() - started < 2.0
        server.apply(pod("w-2"))
        eventually(lambda: ("team-a/train", "ADDED", "pods", "w-2")
                   in published_kube(publisher), timeout=2.0)
    finally:
        watcher.stop()
    from streams.wire.traces import fold_lines

    folded = fold_lines(publisher.lines(), None)
    assert sorted(m.name for m in folded.states["team-a/train"].members.values()) == \
        ["w-0", "w-1", "w-2"]
    assert watcher.metrics.value("gangstate_watch_restarts_total", resource="pods",
                                 cause="gone") == 2  # each of the two pod streams, once


def test_a_403_right_after_a_restart_is_retried_quickly(server: ApiServerDouble,
                                                        caplog: pytest.LogCaptureFixture
                                                        ) -> None:
    """The watches dropped (a restart), then 403 Forbidden for the next 4 requests (the
    authorizer not warm), then served again: retried on the schedule (each retry waits at
    least half its step and at most its step: 0.1-0.2, 0.2-0.4 s ...; not Kafka's backoff of
    0-0.5, 0-1 s ...), the new pod published within 3 s, the watcher not given up."""
    server.apply(pod("w-0"))
    publisher = MemoryPublisher()
    watcher = run_watcher(server, publisher, DEFAULTS, rand=lambda: 0.0)
    try:
        eventually(lambda: server.open_watches("pods") == 2)  # koord-, default-scheduler
        with caplog.at_level(logging.WARNING, logger="producers.watch.watching"):
            server.fail_next(403, count=4, method="GET")
            started = time.monotonic()
            server.drop_watches()
            server.apply(pod("w-1"))
            eventually(lambda: ("team-a/train", "ADDED", "pods", "w-1")
                       in published_kube(publisher), timeout=3.0)
            took = time.monotonic() - started
    finally:
        watcher.stop()
    assert watcher.failure is None
    delays = [(m.group(1), float(m.group(2))) for r in caplog.records
              if (m := re.match(r"(\S+): .*403 .*retrying in ([0-9.]+) s", r.getMessage()))]
    # no jitter drawn (rand 0): each retry waits half its step, 0.1, 0.2, 0.4 s ... per
    # stream (the 4 refused requests may be of several streams); Kafka's full-jitter backoff
    # would wait 0 s
    per_stream: dict[str, list[float]] = {}
    for name, delay in delays:
        per_stream.setdefault(name, []).append(delay)
    assert sum(map(len, per_stream.values())) == 4, delays
    for name, waits in per_stream.items():
        assert waits == [0.1, 0.2, 0.4, 0.8][:len(waits)], (name, waits)
    assert took < 3.0


def test_a_persistent_403_still_ends_the_watch_with_one_line(server: ApiServerDouble) -> None:
    """RBAC really missing (the watch of pods refused after the first list): retried for
    ``refused_for`` (here 1 s), then the one line, naming the refused verb."""
    server.apply(pod("w-0"))
    publisher = MemoryPublisher()
    watcher = run_watcher(server, publisher, WatchConfig(**{**FAST.__dict__,
                                                            "refused_for": 1.0}))
    try:
        eventually(lambda: server.open_watches("pods") == 2)  # koord-, default-scheduler
        server.allow_only([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]}])
        started = time.monotonic()
        server.drop_watches()
        eventually(lambda: watcher.failure is not None, timeout=8.0)
        took = time.monotonic() - started
    finally:
        watcher.stop()
    assert 1.0 <= took < 4.0
    assert re.fullmatch(
        rf"the API server at {re.escape(server.url)} forbids watching \w+ \(API group '[^']*'\) "
        r"cluster-wide \(403 Forbidden\); grant the watch's user or ServiceAccount list and "
        r"watch on it \(deploy/kubernetes/rbac\.yaml\)", watcher.failure or "")
