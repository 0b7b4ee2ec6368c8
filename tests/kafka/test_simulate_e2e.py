"""Simulator -> Kafka -> gangstate worker -> commands -> shim, on a two-node scenario.

The scenario (as ``two_node`` in test_simulator.py): a 2-pod NonStrict gang whose second member
does not fit while the representative waits at Permit; a blocker job frees a node at t=20 s.
Live, at 4 virtual seconds per wall second: the worker folds the cycle records, issues the
SwitchRepresentative command, the shim applies it at the failed member's next PreEnqueue, acks
it, and the gang binds long before its 600 s waiting time would have ended.
"""

from __future__ import annotations

import pytest

from producers.shim.shim import read_acks
from producers.simulate.run import run_live
from producers.simulate.scenario import scenario_from_dict
from streams.dev.worker_process import running_worker

pytestmark = pytest.mark.kafka


def scenario():
    return scenario_from_dict({
        "name": "two-node-live", "start": "2026-11-02T09:00:00Z", "duration": 5, "drain": 75,
        "node_pools": [{"name": "gpu", "count": 2, "gpu": 8, "cpu": 64}],
        "jobs": [
            {"name": "blocker", "namespace": "ops", "gang_size": 1, "gpus_per_pod": 8,
             "member_delay": [0, 0], "runtime": [20, 20], "fixed_arrivals": [0]},
            {"name": "moe", "namespace": "team-b", "gang_size": 2, "gpus_per_pod": 8,
             "member_delay": [0, 0], "runtime": [30, 30], "fixed_arrivals": [2],
             "mode": "NonStrict", "waiting_time": 600},
        ],
    })


def test_live_switch_round_trip(kafka_settings):
    with running_worker(kafka_settings):
        result = run_live(scenario(), seed=1, settings=kafka_settings, speed=4.0,
                          shim_id="e2e")
    assert [(a["command_id"], a["outcome"], a["representative"]) for a in result.acks] == [
        ("team-b/moe-0000#1", "Applied", "team-b/moe-0000-worker-0")]
    assert result.metrics["never_bound"] == 0
    assert result.metrics["switches"] == 1
    # the gang bound when the blocker ended (t~20 s), not after the 600 s waiting time
    assert result.metrics["bind_latency_p99"] < 60
    on_topic = [a for a in read_acks(kafka_settings) if a["gang_group"] == "team-b/moe-0000"]
    assert [(a["outcome"], a["shim"]) for a in on_topic] == [("Applied", "e2e")]
