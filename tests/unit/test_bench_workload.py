"""bench/workload.py: the plan from the Alibaba cluster-trace-gpu-v2023 figures is deterministic
for a seed, follows the trace's GPU table, round-trips through its JSONL file, and has the shares
of special kinds asked for."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bench.workload import (ARRIVALS, DURATION_QUANTILES, GPU_TASKS, OCCUPANCY, TRACE_GPUS,
                            TRACE_HELD_GPUS, Shares, arrival_rate, gpu_share, held_gpus,
                            main, make_plan, nearest_rank, prefill_gangs, read_plan,
                            read_trace_tasks, sample_instants, summary, trace_duration,
                            trace_occupancy, write_plan)


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


def test_held_gpus_counts_tasks_alive_at_the_instant() -> None:
    # (creation, deletion, num_gpu): alive on [creation, deletion)
    tasks = [(0, 10, 1), (5, 15, 8), (10, 20, 2)]
    assert held_gpus(tasks, 0) == 1
    assert held_gpus(tasks, 5) == 9
    assert held_gpus(tasks, 10) == 10  # the first is gone at its deletion, the third is there
    assert held_gpus(tasks, 20) == 0


def test_sample_instants_are_step_midpoints() -> None:
    assert sample_instants(100, 140, 4) == [105.0, 115.0, 125.0, 135.0]


def test_trace_occupancy_median_p5_p95_max() -> None:
    # one task of 4 GPUs on [0, 30), one of 2 on [20, 40): at the 4 midpoints 5, 15, 25, 35
    # held 4, 4, 6, 2 GPUs; sorted 2, 4, 4, 6: median (2nd) 4, p5 (1st) 2, p95 (4th) 6
    tasks = [(0.0, 30.0, 4), (20.0, 40.0, 2)]
    assert trace_occupancy(tasks, 0, 40, n=4) == (4, 2, 6, 6)
    assert nearest_rank([3, 1, 2], 0.5) == 2


def test_occupancy_recount_from_a_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "pods.csv"
    # the trace's header; the CPU-only task (num_gpu 0) is left out
    csv.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                   "creation_time,deletion_time,scheduled_time\n"
                   "p0,1000,1024,1,1000,,LS,Running,0,12901761,0\n"
                   "p1,1000,1024,0,0,,LS,Running,0,12901761,0\n"
                   "p2,1000,1024,8,1000,,LS,Failed,12000000,12500000,12000000\n")
    assert read_trace_tasks(csv) == [(0.0, 12901761.0, 1), (12000000.0, 12500000.0, 8)]
    assert main(["--occupancy-from", str(csv)]) == 0
    out = capsys.readouterr().out
    # the window is the last 3,397,761 s before the last creation (12,000,000 s): p0 always,
    # p2 from 12,000,000 on, which no instant of [8,602,239, 12,000,000) reaches
    assert '"held_gpus_median": 1' in out and '"max": 1' in out


def test_bad_trace_row_names_the_line(tmp_path: Path) -> None:
    csv = tmp_path / "pods.csv"
    csv.write_text("name,num_gpu,creation_time,deletion_time\np0,one,0,10\n")
    with pytest.raises(ValueError, match="pods.csv:2: not a task row"):
        read_trace_tasks(csv)


def test_the_trace_occupancy_figures_as_counted() -> None:
    median, p5, p95, top = TRACE_HELD_GPUS
    assert (median, p5, p95, top) == (40, 26, 54, 71)
    assert round(median / TRACE_GPUS, 4) == 0.0064  # why OCCUPANCY is assumed, not the trace's
    assert OCCUPANCY == 0.8


def test_prefill_fills_the_share_exactly_with_the_trace_sizes() -> None:
    gangs = prefill_gangs(4, 8000, 0.8)
    assert sum(gangs) == 6400
    assert set(gangs) <= set(GPU_TASKS)  # the last may be cut, to 1, 2 or 4 GPUs here
    assert gangs == prefill_gangs(4, 8000, 0.8)
    assert gangs != prefill_gangs(5, 8000, 0.8)
    assert prefill_gangs(4, 8000, 0.0) == []
    # the last is cut to what is left: 3 GPUs of a cluster of 3
    assert sum(prefill_gangs(1, 4, 0.75)) == 3


def test_prefill_sizes_follow_the_trace_table() -> None:
    gangs = prefill_gangs(9, 800_000, 0.9)
    # 8-GPU tasks are 44 of 7,064 (0.62 %); by GPUs they hold 352 of 7,433 (4.7 %)
    eights = sum(g == 8 for g in gangs) / len(gangs)
    assert abs(eights - 44 / 7064) < 0.002
    assert abs(sum(g for g in gangs if g == 8) / sum(gangs) - 352 / 7433) < 0.01


def test_prefill_share_out_of_range_is_one_error() -> None:
    with pytest.raises(ValueError, match=r"occupancy must be in \[0, 1\)"):
        prefill_gangs(1, 8000, 1.0)
