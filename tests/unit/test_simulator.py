"""The simulator: scenario validation, determinism, and the measured effect of the switch.

Values are worked out from the scenarios themselves: the ``small`` scenario fits its gangs with
no failure, so it must bind all 4 gangs without a command; ``two_node`` below is small enough to
follow by hand.
"""

from __future__ import annotations

import dataclasses

import pytest

from producers.simulate.run import percentile, run_in_process
from producers.simulate.scenario import (ScenarioError, load_scenario, plan_workload,
                                         scenario_from_dict)
from streams.wire.traces import fold_lines


def two_node(mode: str) -> dict:
    """2 nodes of 8 GPUs. A 1-pod job takes one node for 20 s from t=0; a 2-pod gang of 8-GPU
    pods arrives at t=2: member 0 fits and waits at Permit, member 1 does not fit until the
    first job ends at t~20."""
    return {
        "name": f"two-node-{mode}", "start": "2026-11-02T09:00:00Z", "duration": 5,
        "drain": 900,
        "node_pools": [{"name": "gpu", "count": 2, "gpu": 8, "cpu": 64}],
        "jobs": [
            {"name": "blocker", "namespace": "ops", "gang_size": 1, "gpus_per_pod": 8,
             "member_delay": [0, 0], "runtime": [20, 20], "fixed_arrivals": [0]},
            {"name": "moe", "namespace": "team-b", "gang_size": 2, "gpus_per_pod": 8,
             "member_delay": [0, 0], "runtime": [60, 60], "fixed_arrivals": [2],
             "mode": mode, "waiting_time": 600},
        ],
    }


BAD = [
    ("no node pools", {"name": "x", "node_pools": [], "jobs": [{"name": "a"}]}, "node_pools"),
    ("unknown job field", {"name": "x", "node_pools": [{"name": "n", "count": 1, "gpu": 8,
                                                        "cpu": 8}],
                           "jobs": [{"name": "a", "gangsize": 3}]}, "gangsize"),
    ("min above size", {"name": "x", "node_pools": [{"name": "n", "count": 1, "gpu": 8,
                                                     "cpu": 8}],
                        "jobs": [{"name": "a", "gang_size": 2, "min_available": 3}]},
     "min_available"),
    ("bad mode", {"name": "x", "node_pools": [{"name": "n", "count": 1, "gpu": 8, "cpu": 8}],
                  "jobs": [{"name": "a", "mode": "strict"}]}, "mode"),
]


@pytest.mark.parametrize("name,data,field", BAD, ids=[b[0] for b in BAD])
def test_bad_scenarios_are_refused_naming_the_field(name, data, field):
    with pytest.raises(ScenarioError, match=field):
        scenario_from_dict(data)


def test_unknown_bundled_name():
    with pytest.raises(ScenarioError, match="bundled"):
        load_scenario("no-such-scenario")


def test_percentile_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([5, 1, 3, 2, 4], 50) == 3
    assert percentile(list(range(1, 101)), 99) == 99


def test_same_seed_same_output_and_another_seed_differs():
    scenario = dataclasses.replace(load_scenario("late-members"), duration=3 * 3600,
                                   drain=1800)
    a = run_in_process(scenario, seed=7, keep_trace=True)
    b = run_in_process(scenario, seed=7, keep_trace=True)
    c = run_in_process(scenario, seed=8, keep_trace=True)
    assert a.trace == b.trace and a.metrics == b.metrics and a.commands == b.commands
    assert len(a.trace) > 500
    assert c.trace != a.trace
    assert plan_workload(scenario, 7) == plan_workload(scenario, 7)


def test_small_scenario_binds_every_gang_without_commands():
    result = run_in_process(load_scenario("small"), seed=1)
    m = result.metrics
    assert (m["gangs"], m["never_bound"], m["silent_waits"]) == (4, 0, 0)
    # 4 nodes x 8 GPUs: finetune-0000 and -0001 take all 32 GPUs (4 attempts); finetune-0002
    # fails at its first member and so does pretrain (2); when finetune-0000 ends (t~42 s)
    # finetune-0002 binds (2) and pretrain fails again (1); when finetune-0001 ends it binds (3).
    # A gang that fails at its first member has nobody waiting at Permit: no command.
    assert m["cycles"] == 12
    assert result.commands == []


def test_member_that_does_not_fit_while_representative_waits():
    on = run_in_process(scenario_from_dict(two_node("NonStrict")), seed=1)
    off = run_in_process(scenario_from_dict(two_node("NonStrict")), seed=1, commands=False)
    switch = [c for c in on.commands if c["type"] == "SwitchRepresentative"]
    # worker-1 is created last, completes min-available and so passes PreEnqueue first: it is
    # the representative, fits and waits at Permit; worker-0 does not fit.
    assert [(c["expected_representative"], c["representative"]) for c in switch] == [
        ("team-b/moe-0000-worker-1", "team-b/moe-0000-worker-0")]
    assert [a["outcome"] for a in on.acks] == ["Applied"]
    moe_on = on.metrics["bind_latency_p99"]
    moe_off = off.metrics["bind_latency_p99"]
    # with the switch the failed member is retried when the blocker finishes (t~20 s, bound
    # ~18 s after the last member was created); without it, it is gated behind the
    # representative parked at Permit until the 600 s waiting time ends.
    assert 15 < moe_on < 25
    assert moe_off > 600
    assert on.metrics["cycles"] < off.metrics["cycles"]


def test_switch_matters_scenario_fewer_cycles_with_commands():
    scenario = dataclasses.replace(load_scenario("switch-matters"), duration=4 * 3600,
                                   drain=3600)
    on = run_in_process(scenario, seed=1)
    off = run_in_process(scenario, seed=1, commands=False)
    assert any(c["type"] == "SwitchRepresentative" for c in on.commands)
    assert sum(1 for a in on.acks if a["outcome"] == "Applied") > 0
    assert on.metrics["cycles_per_gang"] < off.metrics["cycles_per_gang"]
    assert on.metrics["never_bound"] <= off.metrics["never_bound"]


def test_the_trace_folds_offline_to_the_same_commands():
    result = run_in_process(scenario_from_dict(two_node("NonStrict")), seed=1, keep_trace=True)
    folded = fold_lines(((i, line.encode()) for i, line in enumerate(result.trace, 1)), None)
    assert [c["id"] for c in folded.commands] == [c["id"] for c in result.commands]
    assert folded.errors == []
