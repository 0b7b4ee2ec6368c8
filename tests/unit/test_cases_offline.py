"""Every handed case through the offline fold, as ``gangstate fold TRACE --output json``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streams.wire.traces import fold_trace
from tests.fixtures.casecheck import case_dirs, handed_case_dirs, problems, recorded_case_dirs

AT = "2026-12-04T19:05:00Z"
"""After every case, the recorded ones (the last record, of the native cases, at
2026-12-04T18:59) included, with
their timers (stranded: 120 s) due; not ahead of the wall clock, as the worker sets aside a tick
more than 60 s ahead of its Kafka timestamp."""


@pytest.mark.parametrize("case", case_dirs(), ids=lambda p: p.name)
def test_case_through_the_cli(case: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "streams.cli", "fold", str(case / "trace.jsonl"),
                          "--output", "json", "--at", AT],
                         capture_output=True, text=True, timeout=60, check=True)
    out = json.loads(run.stdout)
    assert problems(case, out["diagnostics"], out["commands"], out["gangs"]) == []


def test_there_are_cases() -> None:
    """The five handed cases and the cases recorded on koord-scheduler v1.8.0."""
    assert len(handed_case_dirs()) >= 5
    assert len(recorded_case_dirs()) >= 14


def test_the_fold_is_deterministic() -> None:
    case = case_dirs()[0]
    from streams.wire.contracts import parse_time
    first = fold_trace(case / "trace.jsonl", parse_time(AT)).to_json()
    second = fold_trace(case / "trace.jsonl", parse_time(AT)).to_json()
    assert first == second and first["diagnostics"]
