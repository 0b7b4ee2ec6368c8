"""bench/workload.py: the plan from the Alibaba cluster-trace-gpu-v2023 figures is deterministic
for a seed, follows the trace's GPU table, round-trips through its JSONL file, and has the shares
of special kinds asked for."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bench.workload import (ARRIVALS, DURATION_QUANTILES, GPU_TASKS, TRACE_GPUS, Shares,
                            arrival_rate, gpu_share, make_plan, read_plan, summary,
                            trace_duration, write_plan)


def test_same_seed_same_plan_other_seed_other_plan() -> None:
    assert make_plan(7, nodes=100) == make_plan(7, nodes=100)
    assert make_plan(7, nodes=100) != make_plan(8, nodes=100)


def test_the_trace_figures_as_counted() -> None:
    # 7,064 GPU tasks of openb_pod_list_default.csv; 1 GPU: 6,989 of them (98.94 %)
    assert sum(GPU_TASKS.values()) == 7064
    assert gpu_share()[1] == pytest.approx(0.98938, abs=1e-5)
    # 7,047 tasks in 3,397,761 s: 179.2 a day on 6,212 GPUs
    assert ARRIVALS[0] / ARRIVALS[1] * 86400 == pytest.approx(179.19, abs=0.01)
    # 8,000 GPUs, compressed 500 times: 179.19 * 8000 / 6212 * 500 / 86400 = 1.3355 jobs/s
    assert arrival_rate(8000, 500) == pytest.approx(1.3355, abs=1e-4)
    assert TRACE_GPUS == 6212


def test_duration_quantiles_interpolate_between_the_table_points() -> None:
    assert trace_duration(0.5) == 545
    assert trace_duration(0.1) == 74
    # halfway between p10 (74 s) and p15 (105 s)
    assert trace_duration(0.125) == pytest.approx(89.5)
    assert trace_duration(1.0) == DURATION_QUANTILES[-1][1]


def test_size_distribution_matches_the_trace_table_over_many_jobs() -> None:
    jobs = make_plan(3, nodes=1000, window_s=40000, compress=500, shares=Shares(0, 0, 0, 0))
    assert len(jobs) > 40000  # 1.3355 jobs/s over 40,000 s: about 53,400
    got = summary(jobs)["normal_by_gpus"]
    assert isinstance(got, dict)
    n = sum(got.values())
    for gpus, share in gpu_share().items():
        # within 3 binomial standard deviations of the table's share
        sd = (share * (1 - share) / n) ** 0.5
        assert abs(got.get(gpus, 0) / n - share) < max(3 * sd, 1e-4), gpus
    # a gang's size is its GPU count (one GPU a member by default)
    assert all(j.members == j.gpus for j in jobs)


def test_arrivals_follow_the_scaled_rate_and_durations_the_floor() -> None:
    jobs = make_plan(5, nodes=1000, window_s=20000, compress=500)
    rate = arrival_rate(8000, 500)
    assert abs(len(jobs) / 20000 - rate) < 3 * (rate / 20000) ** 0.5
    assert [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)
    assert all(j.duration_s >= 5 or j.arrival_s + j.duration_s == pytest.approx(20000, abs=1e-3)
               for j in jobs)
    # the trace's median 545 s compressed 500 times is 1.09 s, below the 5 s floor: more than
    # half the jobs live exactly 5 s
    assert sum(j.duration_s == 5 for j in jobs) / len(jobs) > 0.5


def test_shares_of_special_kinds() -> None:
    jobs = make_plan(11, nodes=1000, window_s=30000, shares=Shares(0.02, 0.03, 0.04, 0.05))
    kinds = summary(jobs)["kinds"]
    assert isinstance(kinds, dict)
    n = len(jobs)
    for kind, share in (("cannot-fit", 0.02), ("held", 0.03), ("gated", 0.04),
                        ("stranded", 0.05)):
        assert abs(kinds[kind] / n - share) < 3 * (share * (1 - share) / n) ** 0.5, kind
    one = {j.kind: j for j in jobs}
    assert one["cannot-fit"].gpus_per_member == 9  # one more than a node of 8 has
    assert (one["held"].members, one["held"].min_available) == (2, 3)
    assert one["gated"].gated and not one["normal"].gated
    s = one["stranded"]
    assert s.groups == (f"{s.namespace}/{s.gang}-peer",) and s.peer_delay_s == 5.0


def test_plan_file_round_trip(tmp_path: Path) -> None:
    jobs = make_plan(2, nodes=100, window_s=2000)
    out = io.StringIO()
    write_plan(jobs, out)
    path = tmp_path / "plan.jsonl"
    path.write_text(out.getvalue())
    assert read_plan(path) == jobs


def test_bad_plan_line_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "plan.jsonl"
    path.write_text('{"gang": "a"}\n{"nope": 1}\n')
    with pytest.raises(ValueError, match="plan.jsonl:1"):
        read_plan(path)


def test_bad_arguments_are_one_clear_error() -> None:
    with pytest.raises(ValueError, match="shares"):
        make_plan(1, shares=Shares(0.5, 0.5, 0, 0))
    with pytest.raises(ValueError, match="positive"):
        make_plan(1, nodes=0)


def test_special_kinds_wait_until_the_window_ends() -> None:
    jobs = make_plan(4, nodes=1000, window_s=3000, shares=Shares(0.05, 0.05, 0.05, 0.05))
    special = [j for j in jobs if j.kind != "normal"]
    assert special
    assert all(j.arrival_s + j.duration_s == pytest.approx(3000, abs=2e-3) for j in special)
