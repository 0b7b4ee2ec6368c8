"""Replaying history beside the live fold (issue 21, item 5), on the real broker.

A worker folds live records dated 2026-11-07; ``gangstate replay`` (the command, as a user runs
it) replays a trace dated five days earlier the default way, while more live records arrive.
The replay's own topics must hold exactly the offline fold of that trace alone
(``streams.wire.traces.fold_lines``), and the live topics nothing of it. Then the same trace
with ``--into-live``: the command says on stderr where the live clocks are, and the live
worker fires the replayed gangs' grace timers at once (``1 of minMember 8``), which is why the
default must not do it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from producers.replay import file_lines
from streams.kafka.publishing import ensure_topics
from streams.kafka.reading import read_all, read_topic
from streams.settings import Settings, Topics
from streams.wire.contracts import parse_time
from streams.wire.traces import FoldResult
from tests.fixtures import tracegen as tg
from tests.fixtures import throughkafka
from tests.fixtures.throughkafka import worker_run

pytestmark = pytest.mark.kafka

LIVE_T1 = "2026-11-07T09:02:00Z"  # ticks after the first live batch
AT = "2026-11-07T09:10:00Z"  # ticks after the second live batch; the replay's --at
DAY = 86_400_000_000

OLD = [  # 2026-11-02T09:00 + t: five days before the live records
    tg.pod("team-a", "short-0", 0, 1, gang="short", min_available=4),
    tg.pod("team-a", "short-1", 1, 2, gang="short", min_available=4),
    tg.pod("team-a", "short-2", 2, 3, gang="short", min_available=4),
    *[tg.pod("team-b", f"big-{i}", 3 + i, 10 + i, gang="big", min_available=8)
      for i in range(8)],
    tg.pod("team-a", "short-3", 40, 4, gang="short", min_available=4),
    tg.pod("team-c", "elect-0", 50, 1, gang="elect", min_available=3),
    tg.pod("team-c", "elect-1", 50, 2, gang="elect", min_available=3),
    tg.pod("team-c", "elect-2", 50, 3, gang="elect", min_available=3),
    tg.cycle("team-c", "elect-0", 51, 7, "Permit", "Wait", gang="team-c/elect",
             representative="team-c/elect-0"),
    tg.pod("team-c", "elect-0", 52, 9, gang="elect", min_available=3, type_="DELETED"),
]
OLD_GANGS = ("team-a/short", "team-b/big", "team-c/elect")


def days_later(line: str, days: int) -> str:
    """The trace line with its ``observed_at`` ``days`` later."""
    from streams.core.timefmt import format_time

    rec = json.loads(line)
    rec["observed_at"] = format_time(parse_time(rec["observed_at"]) + days * DAY)
    return json.dumps(rec)


LIVE_1 = [days_later(line, 5) for line in (
    tg.pod("live", "job-0", 0, 1, gang="job", min_available=2),
    tg.pod("live", "job-1", 1, 2, gang="job", min_available=2),
    tg.pod("live", "wait-0", 0, 1, gang="wait", min_available=2))]
LIVE_2 = [days_later(tg.pod("live", "wait-1", 300, 2, gang="wait", min_available=2), 5)]


def numbered(name: str, lines: list[str]) -> list[tuple[str, int, bytes]]:
    return [(name, n, line.encode()) for n, line in enumerate(lines, 1)]


def ids_by_gang(records: list[dict[str, Any]], key: str = "gang") -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for rec in records:
        out.setdefault(rec[key], []).append(rec["id"])
    return out


def facts(records: list[dict[str, Any]], gang: str) -> list[tuple[str, str, str]]:
    return [(d["reason"], d["observed_at"], d["message"]) for d in records if d["gang"] == gang]


@pytest.fixture(scope="module")
def run(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A live worker; live batch 1; ``gangstate replay OLD`` (default: its own topics) with
    live batch 2 published while it runs; then ``gangstate replay --into-live OLD``."""
    folder = tmp_path_factory.mktemp("replay-isolation")
    trace = folder / "old-trace.jsonl"
    trace.write_text("\n".join(OLD) + "\n")
    tag = uuid.uuid4().hex[:8]
    live = Settings(bootstrap=kafka_bootstrap, topics=Topics(f"iso-{tag}."),
                    app_id=f"gangstate-iso-{tag}")
    ensure_topics(live)
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
           "GANGSTATE_TOPIC_PREFIX": live.topics.prefix, "GANGSTATE_APP_ID": live.app_id,
           "GANGSTATE_PARTITIONS": str(live.partitions)}
    command = [sys.executable, "-m", "streams.cli", "replay", str(trace), "--at", AT]
    out: dict[str, Any] = {"live": live}
    log = folder / "live-worker.log"
    with worker_run(live, log) as worker:
        worker.replay(numbered("live-1", LIVE_1), at=parse_time(LIVE_T1))
        worker.caught_up()
        proc = subprocess.Popen([*command, "--name", "five-days-old"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        head = []
        for line in proc.stdout:  # the live records go on while the replay's worker folds
            head.append(line)
            if line.startswith("published "):
                break
        worker.replay(numbered("live-2", LIVE_2), at=parse_time(AT))
        rest, err = proc.communicate(timeout=300)
        out["default"] = (proc.returncode, "".join(head) + rest, err)
        worker.caught_up()
        t = live.topics
        out["live_before"] = worker.read()
        out["live_inputs"] = list(read_topic(live, t.gang_events))
        into = subprocess.run([*command, "--into-live"], env=env, capture_output=True,
                              text=True, timeout=120)
        out["into_live"] = (into.returncode, into.stdout, into.stderr)
        worker.caught_up()
        out["live_after"] = worker.read(t.diagnostics)[t.diagnostics]
    own = Settings(bootstrap=kafka_bootstrap, topics=Topics(f"{live.topics.prefix}"
                                                            "replay-five-days-old."),
                   app_id=f"{live.app_id}-replay-five-days-old")
    o = own.topics
    out["own"] = own
    out["replayed"] = read_all(own, [o.diagnostics, o.commands, o.dead_letters])
    out["replayed_inputs"] = list(read_topic(own, o.gang_events))
    return out


def offline(lines: list[str], at: str = AT) -> FoldResult:
    return throughkafka.offline(numbered("x", lines), parse_time(at))


def test_the_default_replay_says_where_it_went(run: dict[str, Any]) -> None:
    status, stdout, stderr = run["default"]
    prefix, app_id = run["own"].topics.prefix, run["own"].app_id
    assert status == 0, stderr
    assert stdout.splitlines()[0] == (
        f"replaying into topics of its own ({prefix}*), folded by a worker of its own (app id "
        f"{app_id}); the live topics and their clocks are not touched")
    assert f"published 17 records to {prefix}gang-events, 8 ticks; dropped: none; " \
           f"malformed: 0" in stdout
    assert f"folded by its own worker (app id {app_id}): 3 diagnostics in " \
           f"{prefix}diagnostics, 1 command in {prefix}commands" in stdout
    assert f"gangstate tap diagnostics --prefix {prefix} --from-beginning" in stdout
    assert f"GANGSTATE_APP_ID={app_id} gangstate worker --prefix {prefix}" in stdout
    assert stderr == ""


def test_the_replay_topics_hold_exactly_the_offline_fold_of_the_trace_alone(
        run: dict[str, Any]) -> None:
    o = run["own"].topics
    got = run["replayed"]
    expected = offline(OLD)
    assert ids_by_gang(got[o.diagnostics]) == ids_by_gang(expected.diagnostics)
    assert ids_by_gang(got[o.commands], "gang_group") == \
        ids_by_gang(expected.commands, "gang_group")
    assert got[o.commands] == expected.commands
    assert got[o.dead_letters] == []
    assert len(run["replayed_inputs"]) == len(OLD) + 8  # its records and ticks, nothing else


def test_the_replayed_outputs_worked_out_by_hand(run: dict[str, Any]) -> None:
    o = run["own"].topics
    diagnostics, commands = run["replayed"][o.diagnostics], run["replayed"][o.commands]
    # 3 pods of min-available 4 from 09:00:00: held past the 10 s grace; the 4th at 09:00:40
    assert facts(diagnostics, "team-a/short") == [
        ("GangMembersInsufficient", "2026-11-02T09:00:10.000000Z",
         "gang team-a/short has 3 of minMember 4 pods; scheduling is held at PreEnqueue until "
         "1 more exists"),
        ("GangMembersSatisfied", "2026-11-02T09:00:40.000000Z",
         "gang team-a/short has 4 of minMember 4 pods; no longer held at PreEnqueue")]
    # 8 pods of 8, one a second from 09:00:03: complete within the grace period, no warning
    assert facts(diagnostics, "team-b/big") == []
    # the representative elect-0 (Permit Wait) deleted at 09:00:52: elect-1, the earliest
    # pending member, is named; 2 of 3 are left, held after the grace period
    assert facts(diagnostics, "team-c/elect") == [
        ("GangMembersInsufficient", "2026-11-02T09:01:02.000000Z",
         "gang team-c/elect has 2 of minMember 3 pods; scheduling is held at PreEnqueue until "
         "1 more exists")]
    assert [(c["type"], c["epoch"], c["expected_representative"], c["representative"],
             c["reason"], c["issued_at"]) for c in commands] == [
        ("ElectRepresentative", 1, "team-c/elect-0", "team-c/elect-1", "RepresentativeDeleted",
         "2026-11-02T09:00:52.000000Z")]


def test_the_live_topics_got_nothing_from_the_replay(run: dict[str, Any]) -> None:
    t = run["live"].topics
    live = run["live_before"]
    inputs = run["live_inputs"]
    assert len(inputs) == len(LIVE_1) + len(LIVE_2) + 16  # two batches, 8 ticks each
    assert not [key for key, _ in inputs if key in OLD_GANGS]
    expected = offline(LIVE_1 + [json.dumps({"schema": "gangstate.tick/v1",
                                             "observed_at": LIVE_T1})] + LIVE_2)
    assert ids_by_gang(live[t.diagnostics]) == ids_by_gang(expected.diagnostics)
    assert facts(live[t.diagnostics], "live/wait") == [
        ("GangMembersInsufficient", "2026-11-07T09:00:10.000000Z",
         "gang live/wait has 1 of minMember 2 pods; scheduling is held at PreEnqueue until "
         "1 more exists"),
        ("GangMembersSatisfied", "2026-11-07T09:05:00.000000Z",
         "gang live/wait has 2 of minMember 2 pods; no longer held at PreEnqueue")]
    assert ids_by_gang(live[t.diagnostics]).keys() == {"live/wait"}
    assert live[t.commands] == [] and live[t.dead_letters] == []


def test_into_live_says_where_the_clocks_are_and_fires_stale_timers(
        run: dict[str, Any]) -> None:
    status, stdout, stderr = run["into_live"]
    t = run["live"].topics
    assert status == 0, stderr
    assert stdout == (f"published 17 records to {t.gang_events}, 8 ticks; dropped: none; "
                      f"malformed: 0\n")
    assert stderr.startswith(f"gangstate replay --into-live: publishing into the live "
                             f"{t.gang_events}")
    assert ("Its partitions' clocks are at 2026-11-07T09:10:00.000000Z (newest; oldest "
            "2026-11-07T09:10:00.000000Z; 8 of 8 partitions hold records) and the trace "
            "starts at 2026-11-02T09:00:00.000000Z, 5.0 days earlier.") in stderr
    # What the default replay avoids: each old record folded at the live clock fires the
    # grace timer its predecessor set, so team-b/big warns "1 of 8" .. "7 of 8", which the
    # fold of the trace alone never says.
    stale = [m for _r, _at, m in facts(run["live_after"], "team-b/big")]
    assert stale[0] == ("gang team-b/big has 1 of minMember 8 pods; scheduling is held at "
                        "PreEnqueue until 7 more exist")
    assert len(stale) == 8  # 7 stale warnings, then GangMembersSatisfied
    assert facts(offline(OLD).diagnostics, "team-b/big") == []
