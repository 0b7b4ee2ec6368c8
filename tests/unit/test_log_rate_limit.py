"""``RateLimitFilter``: each kind of log line at most once per interval, then one line with the
count of the ones dropped (streams/kafka/logs.py)."""

from __future__ import annotations

import logging

from streams.kafka.logs import RateLimitFilter


def records(limiter: RateLimitFilter, clock: list[float], times: list[float],
            msg: str = "Unable connect to node with id %s: %s", name: str = "aiokafka.conn",
            level: int = logging.ERROR) -> list[str]:
    out = []
    for t in times:
        clock[0] = t
        rec = logging.LogRecord(name, level, __file__, 1, msg, (1, "refused"), None)
        if limiter.filter(rec):
            out.append(rec.getMessage())
    return out


def test_110_lines_a_second_become_one_line_per_10_s_with_the_count():
    clock = [0.0]
    limiter = RateLimitFilter(10.0, clock=lambda: clock[0])
    times = [i / 110 for i in range(110 * 25)]  # 25 s at 110 lines per second
    written = records(limiter, clock, times)
    # t=0 written; 0 < t < 10 dropped (1099); t=10.0 written with the count; and so on
    assert written == [
        "Unable connect to node with id 1: refused",
        "Unable connect to node with id 1: refused (1099 more like this in the last 10 s)",
        "Unable connect to node with id 1: refused (1099 more like this in the last 10 s)",
    ]


def test_kinds_are_told_apart_by_logger_level_and_template():
    clock = [0.0]
    limiter = RateLimitFilter(10.0, clock=lambda: clock[0])
    assert len(records(limiter, clock, [0, 1])) == 1
    assert len(records(limiter, clock, [2], msg="Unable to update metadata from %s %s")) == 1
    assert len(records(limiter, clock, [3], name="aiokafka.client")) == 1
    assert len(records(limiter, clock, [4], level=logging.WARNING)) == 1
    # the line dropped at t=1 is counted on the next one written, however late
    assert records(limiter, clock, [30]) == [
        "Unable connect to node with id 1: refused (1 more like this in the last 30 s)"]
    # seen once and quiet for longer than the interval: written again, nothing to count
    assert records(limiter, clock, [45]) == ["Unable connect to node with id 1: refused"]


def test_a_coordinator_not_there_yet_is_quiet_for_its_grace_then_written() -> None:
    """aiokafka logs ERROR ``Group Coordinator Request failed: [Error 15]
    GroupCoordinatorNotAvailableError`` while a new broker creates ``__consumer_offsets``, and
    retries. Failing lookups at t=0, 1, 29.9 s are dropped; at 30 s (a run of 30 s: a broker
    with a problem) written; a later run (after 31 s of quiet) is quiet again; an error that
    is not a coordinator's, or not retriable, always passes."""
    import logging

    import aiokafka.errors as errors

    from streams.kafka.logs import COORDINATOR_LOGGER, CoordinatorStartFilter

    now = [0.0]
    quiet = CoordinatorStartFilter(grace=30, clock=lambda: now[0])

    def record(err: Exception) -> logging.LogRecord:
        return logging.LogRecord(COORDINATOR_LOGGER, logging.ERROR, __file__, 1,
                                 "Group Coordinator Request failed: %s", (err,), None)

    passed = []
    for t in (0, 1, 29.9, 30, 40):
        now[0] = t
        passed.append(quiet.filter(record(errors.GroupCoordinatorNotAvailableError())))
    assert passed == [False, False, False, True, True]
    now[0] = 71.0  # 31 s after the last one: a new run
    assert quiet.filter(record(errors.NotCoordinatorForGroupError())) is False
    assert quiet.filter(record(errors.GroupAuthorizationFailedError())) is True
    assert quiet.filter(record(errors.KafkaConnectionError())) is True
