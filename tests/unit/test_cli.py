"""The ``gangstate fold`` command as a user runs it: text and JSON output, malformed lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fixtures.tracegen import gated_representative

CASES = Path(__file__).resolve().parents[1] / "cases"


def fold(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streams.cli", "fold", *args],
                          capture_output=True, text=True, timeout=60)


def gated_trace(tmp_path: Path) -> Path:
    """The shim's gated representative (``tracegen.gated_representative``) as a trace file."""
    trace = tmp_path / "gated.jsonl"
    trace.write_text("\n".join(gated_representative()) + "\n")
    return trace


def test_text_output_has_one_block_per_gang(tmp_path):
    run = fold(str(gated_trace(tmp_path)), "--at", "2026-11-03T00:00:00Z")
    assert run.returncode == 0
    assert run.stdout.splitlines() == [
        "gang team-g/g  phase=Scheduling  members=3/2  bound=0  waiting=0  "
        "representative=team-g/g-0",
        "  2026-11-02T09:00:03.000000Z  Command SwitchRepresentative epoch 1: team-g/g-0 -> "
        "team-g/u-0 (RepresentativeGated, cycle 40)"]


def test_a_malformed_line_is_reported_with_its_number_and_nothing_else_is_lost(tmp_path):
    good = (CASES / "insufficient-members/trace.jsonl").read_text().splitlines()
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(good[:2] + ['{"schema": "gangstate.kube/v1"}'] + good[2:]) + "\n")
    run = fold(str(trace), "--output", "json", "--at", "2026-11-03T00:00:00Z")
    assert run.returncode == 0
    assert f"{trace}:3: skipped malformed record: invalid record" in run.stderr
    out = json.loads(run.stdout)
    assert out["input"]["records"] == len(good) and out["input"]["malformed"] == 1
    assert out["gangs"]["team-a/llm-pretrain"]["members"] == 4
    assert [d["reason"] for d in out["diagnostics"]] == ["GangMembersInsufficient",
                                                         "GangMembersSatisfied"]


def test_a_missing_file_is_a_clear_error():
    run = fold("/nonexistent/trace.jsonl")
    assert run.returncode == 2 and "cannot read /nonexistent/trace.jsonl" in run.stderr


def test_the_final_tick_time_decides_whether_a_warning_is_due():
    trace = str(CASES / "podgroup-missing/trace.jsonl")
    # the trace's last record (line 3, 09:02:00) is 115 s after --at: set aside, as the worker
    # sets aside a record that far ahead of its Kafka timestamp; no warning is due by 09:00:05
    early = json.loads(fold(trace, "-o", "json", "--at", "2026-11-02T09:00:05Z").stdout)
    assert early["diagnostics"] == []
    assert [s["line"] for s in early["input"]["set_aside"]] == [3]
    assert early["gangs"]["vision/resnet-ddp"]["phase"] == "NotInitialized"
    # within the skew of --at (30 s), the record is folded: the warning, then its end
    late = json.loads(fold(trace, "-o", "json", "--at", "2026-11-02T09:01:30Z").stdout)
    assert [d["reason"] for d in late["diagnostics"]] == ["GangNotInitialized",
                                                          "GangMembersSatisfied"]
    assert late["input"]["set_aside"] == []
    assert late["gangs"]["vision/resnet-ddp"]["phase"] == "Ready"


def test_text_output_shows_each_command_under_its_own_gang_only(tmp_path):
    trace = tmp_path / "two.jsonl"
    trace.write_text((CASES / "insufficient-members/trace.jsonl").read_text()
                     + gated_trace(tmp_path).read_text())
    run = fold(str(trace), "--at", "2026-11-03T00:00:00Z")
    assert run.returncode == 0
    assert run.stdout.count("Command SwitchRepresentative") == 1
    lines = run.stdout.splitlines()
    headers = [i for i, line in enumerate(lines) if line.startswith("gang ")]
    command = next(i for i, line in enumerate(lines) if "Command SwitchRepresentative" in line)
    owner = max(h for h in headers if h < command)
    assert lines[owner].startswith("gang team-g/g  phase=")


def test_the_fold_takes_the_worker_s_hold_settings() -> None:
    """The recorded never-fitting gang with the shim (3 x 1 GPU on 2 GPUs): held and released
    with holds on (the default), nothing with GANGSTATE_HOLDS=off; a renewal not below the TTL
    is one line."""
    import os

    trace = str(CASES / "recorded/shim-gpu-short/trace.jsonl")

    def run(**env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "streams.cli", "fold", trace, "--output",
                               "json", "--at", "2026-12-02T13:55:00Z"],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, **env})

    def commands(**env: str) -> list[tuple[str, str]]:
        return [(c["type"], c["reason"]) for c in json.loads(run(**env).stdout)["commands"]]

    assert commands() == [("HoldGang", "GangCannotFit"), ("ReleaseGang", "SpecChanged")]
    assert commands(GANGSTATE_HOLDS="off") == []
    bad = run(GANGSTATE_HOLD_RENEW_SECONDS="200")
    assert bad.returncode != 0 and bad.stdout == ""
    assert bad.stderr.splitlines() == [
        "gangstate: GANGSTATE_HOLD_RENEW_SECONDS=200: must be below "
        "GANGSTATE_HOLD_TTL_SECONDS=180 (a hold renewed no sooner than it lapses would lapse)"]
