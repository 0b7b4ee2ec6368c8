"""Bounded logging: the same log line at most once per interval, with a count of the repeats.

Where it sits: beside the Kafka clients of every component. While the broker is down, aiokafka
and Faust log each failed connection, metadata refresh, fetch and coordinator lookup: about 110
error lines per second per worker (72 measured on a loaded 2-core machine, issue 15), which
drowns every other line and fills the node's log volume. ``RateLimitFilter`` on the process's
log handlers lets the first line of each kind through, drops the repeats for ``interval``
seconds, and then writes the next one with how many were dropped.

Must not: drop a line of a kind not seen within the interval, or change what is logged
otherwise.
"""

from __future__ import annotations

import logging
import time
from typing import IO, Callable

INTERVAL_SECONDS = 10.0
"""How long the repeats of one kind of log line are dropped after one is written, seconds."""

KINDS = 1024
"""Kinds of log line remembered at most (forgotten all at once when full)."""


class RateLimitFilter(logging.Filter):
    """A ``logging.Filter`` that writes each kind of record at most once per ``interval``
    seconds (``clock``: seconds, monotonic by default).

    A record's kind is its logger, level and message template (``record.msg`` before its
    arguments are filled in: ``Unable connect to node with id %s: %s`` is one kind whatever the
    node). The first record of a kind is written; the ones that follow within ``interval``
    seconds are dropped and counted; the first one after that is written with `` (N more like
    this in the last S s)`` appended, and starts a new interval. Thread-safe enough for logging:
    a race may let one extra line through, never lose the count of many.
    """

    def __init__(self, interval: float = INTERVAL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval = interval
        self.clock = clock
        self._kinds: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        """``True`` to write ``record`` (possibly with the count of the dropped ones)."""
        kind = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        seen = self._kinds.get(kind)
        if seen is not None and now - seen[0] < self.interval:
            self._kinds[kind] = (seen[0], seen[1] + 1)
            return False
        if len(self._kinds) >= KINDS:
            self._kinds.clear()
        self._kinds[kind] = (now, 0)
        if seen is not None and seen[1]:
            record.msg = f"{record.getMessage()} ({seen[1]} more like this in the last " \
                         f"{now - seen[0]:.0f} s)"
            record.args = ()
        return True


def limited_handler(stream: IO[str] | None = None,
                    interval: float = INTERVAL_SECONDS) -> logging.Handler:
    """A ``logging.StreamHandler`` on ``stream`` (default ``sys.stderr``) with a
    ``RateLimitFilter``: hand it to ``logging.basicConfig(handlers=[...])``, which leaves a
    process that already has handlers (a test runner's) as it is."""
    handler = logging.StreamHandler(stream)
    handler.addFilter(RateLimitFilter(interval))
    return handler


def limit_handlers(logger: logging.Logger | None = None,
                   interval: float = INTERVAL_SECONDS) -> RateLimitFilter:
    """Put one ``RateLimitFilter`` on every handler of ``logger`` (default: the root logger,
    which every library's records reach) that has none yet; returns the filter."""
    target = logger or logging.getLogger()
    limiter = RateLimitFilter(interval)
    for handler in target.handlers:
        if not any(isinstance(f, RateLimitFilter) for f in handler.filters):
            handler.addFilter(limiter)
    return limiter


COORDINATOR_LOGGER = "aiokafka.consumer.group_coordinator"
"""The aiokafka logger that reports a failed group coordinator lookup (``log.error("Group
Coordinator Request failed: %s", err)``, aiokafka ``consumer/group_coordinator.py``
``ensure_coordinator_known``), then retries it when the error is retriable."""
COORDINATOR_STARTING = (14, 15, 16)
"""Kafka error codes of a group coordinator that is not there yet: ``COORDINATOR_LOAD_IN_PROGRESS``
(14), ``COORDINATOR_NOT_AVAILABLE`` (15: on a new broker until ``__consumer_offsets`` exists),
``NOT_COORDINATOR`` (16: it moved)."""
COORDINATOR_GRACE_SECONDS = 30.0
"""How long a run of such lookups may fail before its lines are written (seconds)."""


class CoordinatorStartFilter(logging.Filter):
    """A ``logging.Filter`` for ``COORDINATOR_LOGGER`` that drops its ``ERROR`` lines for a
    coordinator not there yet (``COORDINATOR_STARTING``, retried by aiokafka) during the first
    ``grace`` seconds of a run of them (``clock``: seconds, monotonic by default): a worker
    started beside a new broker printed ``[ERROR] Group Coordinator Request failed: [Error
    15] GroupCoordinatorNotAvailableError`` once and then ran normally. A run longer than
    ``grace`` is a broker that has a problem: its lines are written (rate-limited as every
    line). A record quiet for ``grace`` seconds starts a new run. Other records pass."""

    def __init__(self, grace: float = COORDINATOR_GRACE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.grace = grace
        self.clock = clock
        self._run_start: float | None = None
        self._last: float | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        """``False`` to drop ``record``: a coordinator lookup failing for less than
        ``grace`` seconds."""
        args = record.args if isinstance(record.args, tuple) else ()
        err = args[0] if args else None
        if getattr(err, "errno", None) not in COORDINATOR_STARTING \
                or not getattr(err, "retriable", False):
            return True
        now = self.clock()
        if self._last is None or now - self._last > self.grace:
            self._run_start = now
        self._last = now
        assert self._run_start is not None
        return now - self._run_start >= self.grace


def quiet_coordinator_start(grace: float = COORDINATOR_GRACE_SECONDS) -> CoordinatorStartFilter:
    """Put a ``CoordinatorStartFilter`` on ``COORDINATOR_LOGGER`` (once) and return it."""
    logger = logging.getLogger(COORDINATOR_LOGGER)
    for existing in logger.filters:
        if isinstance(existing, CoordinatorStartFilter):
            return existing
    found = CoordinatorStartFilter(grace)
    logger.addFilter(found)
    return found

