"""The worker's batch path through a rebalance: a second worker joins the group halfway
through the log, takes half of the partitions (and their gangs, from the changelog), and the
outputs and the gang table still equal the offline fold of the same log, gang by gang.

``streams.worker.faust_patches`` hands ``gang-events`` to the agent in batches (not through
Faust's per-event stream); this checks what that path must keep: per-key order, every record
folded once, records fetched before the rebalance not folded twice or lost, and the table's
changelog co-partitioned so that the new owner of a partition resumes its gangs.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from streams.kafka.publishing import Publisher
from streams.kafka.reading import wait_group_stable
from streams.settings import Settings
from streams.core.state import from_wire, summary
from streams.wire.traces import fold_lines
from tests.fixtures import tracegen
from tests.fixtures.throughkafka import caught_up, log_tail, worker_run
from tests.kafka.test_pipeline import by_key

pytestmark = pytest.mark.kafka

GANGS = 160
"""Gangs of the log: 3 pods each (min-available 3), spread over the 8 partitions."""


def gang_log() -> list[tuple[str, bytes]]:
    """``(gang id, value)`` in event-time order: per gang, three pods ADDED, then a cycle in
    which the representative waits at Permit, the second pod fails Filter and the
    representative is rejected (at t+1 to t+1.2), then, 11 s later, a second cycle in which
    all three pass Permit, then the three pods MODIFIED with a node. The fold answers each gang
    with one ``GangUnschedulable`` (its failure episode's, by timer 10 s after the failure,
    fired by the gang's own next record at the latest) and one ``GangScheduled`` (the third pod
    seen bound): 1,920 records and 320 diagnostics (what the offline fold gives, checked below
    before it is compared with the Kafka path)."""
    out: list[tuple[str, bytes]] = []
    for g in range(GANGS):
        ns, name = f"rb-{g % 7}", f"job-{g}"
        gang = f"{ns}/{name}"
        t = g * 0.02
        pods = [f"{name}-{i}" for i in range(3)]
        for i, p in enumerate(pods):
            out.append((gang, tracegen.pod(ns, p, t + 0.001 * i, 10 + i, gang=name,
                                           min_available=3).encode()))
        cyc = 1000 + 10 * g
        out.append((gang, tracegen.cycle(ns, pods[0], t + 1, cyc, "Permit", "Wait", gang=gang,
                                         representative=pods[0]).encode()))
        out.append((gang, tracegen.cycle(ns, pods[1], t + 1.1, cyc, "Filter", "Unschedulable",
                                         gang=gang, reason="Insufficient nvidia.com/gpu",
                                         representative=pods[0]).encode()))
        out.append((gang, tracegen.cycle(ns, pods[0], t + 1.2, cyc, "Permit", "Rejected",
                                         gang=gang, representative=pods[0]).encode()))
        for i, p in enumerate(pods):
            out.append((gang, tracegen.cycle(ns, p, t + 12 + 0.01 * i, cyc + 1, "Permit",
                                             "Success" if i == 2 else "Wait", gang=gang,
                                             representative=pods[0]).encode()))
        for i, p in enumerate(pods):
            out.append((gang, tracegen.pod(ns, p, t + 13 + 0.01 * i, 20 + i, gang=name,
                                           min_available=3, type_="MODIFIED",
                                           node=f"node-{i}").encode()))
    out.sort(key=lambda kv: json.loads(kv[1])["observed_at"])
    return out


def test_a_second_worker_joining_halfway_changes_no_output(
        kafka_settings: Settings, tmp_path: Path) -> None:
    settings = kafka_settings  # 8 partitions
    log = gang_log()
    expected = fold_lines(((n, v) for n, (_k, v) in enumerate(log)), None)
    half = len(log) // 2
    with worker_run(settings, tmp_path / "worker-1.log") as first:
        pub = Publisher(settings)
        for gang, value in log[:half]:
            pub.send(settings.topics.gang_events, gang, value)
        pub.flush()
        with worker_run(settings, tmp_path / "worker-2.log", ready_timeout=None) as second:
            alive = lambda: first.alive() and second.alive()  # noqa: E731
            assert wait_group_stable(settings.bootstrap, settings.app_id, 120, alive=alive,
                                     security=settings.security, members=2), \
                log_tail(second.log_path)
            for gang, value in log[half:]:
                pub.send(settings.topics.gang_events, gang, value)
            pub.close()
            assert wait_group_stable(settings.bootstrap, settings.app_id, 120, alive=alive)
            caught_up(settings, alive, 180, lambda: log_tail(second.log_path))
            t = settings.topics
            got = second.read()
            table = second.table()
            assert second.alive() and first.alive()
    assert got[t.dead_letters] == []
    assert len(log) == 12 * GANGS
    assert Counter(d["reason"] for d in expected.diagnostics) == {
        "GangUnschedulable": GANGS, "GangScheduled": GANGS}
    assert by_key(got[t.diagnostics], "gang") == by_key(expected.diagnostics, "gang")
    assert len(got[t.commands]) == len(expected.commands)
    assert sorted(table) == sorted(expected.states)
    for gang, state in expected.states.items():
        assert summary(from_wire(table[gang])) == summary(state)
