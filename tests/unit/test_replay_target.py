"""Where ``gangstate replay`` publishes (``streams.cli.pipeline.replay_target``,
``producers.replay.own_settings``): topics and an app id of its own by default, the live ones
only with ``--into-live``; the flags that exclude each other; and what it says on stderr about
the partitions' clocks (``clock_warning``, ``reuse_warning``), with values worked out by hand.
No broker: every usage error is found before anything connects."""

from __future__ import annotations

import calendar

import click
import pytest

from producers.replay import clock_warning, own_settings, reuse_warning, time_span
from streams.cli import main
from streams.cli.pipeline import replay_target
from streams.settings import Settings, Topics
from streams.wire.contracts import parse_time

LIVE = Settings(bootstrap="127.0.0.1:1", topics=Topics("gangstate."), app_id="gangstate")
NOW = calendar.timegm((2026, 12, 1, 20, 30, 5, 0, 0, 0))  # 2026-12-01T20:30:05Z
LIVE_CLOCK = parse_time("2026-11-07T09:10:00Z")
TRACE_START = parse_time("2026-11-02T09:00:00Z")  # 5 days 10 minutes earlier


def test_by_default_a_replay_gets_topics_and_an_app_id_named_after_its_start() -> None:
    target = replay_target(LIVE, into_live=False, name=None, now=NOW)
    assert target.topics.gang_events == "gangstate.replay-20261201-203005.gang-events"
    assert target.topics.diagnostics == "gangstate.replay-20261201-203005.diagnostics"
    assert target.app_id == "gangstate-replay-20261201-203005"
    # everything else is the live pipeline's: the same Kafka, partitions and fold
    assert (target.bootstrap, target.partitions, target.fold, target.security) == \
        (LIVE.bootstrap, LIVE.partitions, LIVE.fold, LIVE.security)


def test_a_named_replay_follows_the_live_prefix_and_app_id() -> None:
    live = Settings(bootstrap="k:9092", topics=Topics("prod."), app_id="gs-eu")
    target = replay_target(live, into_live=False, name="incident-42")
    assert target.topics.prefix == "prod.replay-incident-42."
    assert target.app_id == "gs-eu-replay-incident-42"
    assert own_settings(live, "incident-42") == target


def test_into_live_publishes_into_the_live_topics_only_when_asked() -> None:
    target = replay_target(LIVE, into_live=True, name=None)
    assert target is LIVE
    assert target.topics.gang_events == "gangstate.gang-events"
    assert target.app_id == "gangstate"


@pytest.mark.parametrize("name", ["a.b", "", "-x", "x/y", "x" * 65])
def test_a_name_that_cannot_be_a_topic_part_is_a_usage_error(name: str) -> None:
    with pytest.raises(click.UsageError, match="--name: replay name"):
        replay_target(LIVE, into_live=False, name=name)


def test_name_and_into_live_exclude_each_other() -> None:
    with pytest.raises(click.UsageError, match="--into-live publishes into the live ones"):
        replay_target(LIVE, into_live=True, name="x")


@pytest.mark.parametrize("flags, message", [
    (["--into-live", "--name", "x"], "--into-live publishes into the live ones"),
    (["--into-live", "--http-port", "6067"], "excludes --no-worker and --http-port"),
    (["--into-live", "--no-worker"], "excludes --no-worker and --http-port"),
    (["--no-worker", "--http-port", "6067"], "--no-worker and --http-port exclude each other"),
    (["--name", "a.b"], "--name: replay name 'a.b'"),
])
def test_the_command_refuses_flags_that_exclude_each_other_with_exit_2(
        capsys: pytest.CaptureFixture[str], flags: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as done:
        main(["replay", "trace.jsonl", "--bootstrap", "127.0.0.1:1", *flags])
    out, err = capsys.readouterr()
    assert (done.value.code, out) == (2, "")
    assert message in err


def test_the_clock_warning_gives_the_live_clocks_and_how_far_back_the_trace_starts() -> None:
    clocks = {0: LIVE_CLOCK, 1: LIVE_CLOCK - 60_000_000, 2: None}
    text = clock_warning("gangstate.gang-events", clocks,
                         (TRACE_START, TRACE_START + 40_000_000))
    assert text.startswith("gangstate replay --into-live: publishing into the live "
                           "gangstate.gang-events, folded by the live worker")
    assert ("Its partitions' clocks are at 2026-11-07T09:10:00.000000Z (newest; oldest "
            "2026-11-07T09:09:00.000000Z; 2 of 3 partitions hold records) and the trace starts "
            "at 2026-11-02T09:00:00.000000Z, 5.0 days earlier.") in text
    assert "every timer of its gang due by then fires at once" in text
    assert "\n" not in text


def test_the_clock_warning_without_known_clocks() -> None:
    span = (TRACE_START, TRACE_START)
    assert "It does not exist yet" in clock_warning("t", {}, span)
    assert "Its 8 partitions hold no record yet" in clock_warning(
        "t", dict.fromkeys(range(8)), span)
    assert "could not be read" in clock_warning("t", None, span)
    later = clock_warning("t", {0: TRACE_START - 1_000_000}, span)
    assert "the trace starts at 2026-11-02T09:00:00.000000Z, after them" in later


def test_a_reused_name_warns_when_the_trace_is_older_than_its_topics() -> None:
    text = reuse_warning("gangstate.replay-x.", TRACE_START + 90 * 60_000_000,
                         (TRACE_START, TRACE_START))
    assert text == ("gangstate replay: the replay's topics gangstate.replay-x.* already hold "
                    "records up to 2026-11-02T10:30:00.000000Z and these traces start at "
                    "2026-11-02T09:00:00.000000Z, 1.5 h earlier: their records older than "
                    "that clock fire their gangs' timers at once; give a new --name for a "
                    "replay of its own.")
    assert reuse_warning("p.", TRACE_START, (TRACE_START, TRACE_START)).endswith(
        "these traces continue that replay.")


def test_time_span_leaves_malformed_lines_out() -> None:
    lines = [("t", 1, b'{"observed_at": "2026-11-02T09:00:05Z"}'),
             ("t", 2, b"not json"),
             ("t", 3, b'{"observed_at": "2026-11-02T09:00:01Z"}')]
    assert time_span(lines) == (parse_time("2026-11-02T09:00:01Z"),
                                parse_time("2026-11-02T09:00:05Z"))
    assert time_span([("t", 1, b"{}")]) is None
