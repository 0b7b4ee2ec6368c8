"""The offline fold sets aside a record far ahead of the rest of its trace (or of ``--at``), as
the worker dead-letters one far ahead of its Kafka timestamp (docs/contracts.md, "Limits"):
never a clock jump that fires every timer at once. Before, one tick dated 2099 in a trace made
``gangstate fold`` emit a ``GangMembersInsufficient`` that the same trace without it did not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from streams.core.timefmt import format_time, parse_time
from streams.wire.traces import SetAside, far_ahead, fold_lines
from tests.fixtures.builders import kube_pod, pod_line

CASES = Path(__file__).resolve().parents[1] / "cases"
T0 = parse_time("2026-11-02T09:00:00Z")
S = 1_000_000
AT = parse_time("2026-11-29T00:00:00Z")
FUTURE = "2099-01-01T00:00:00.000000Z"


def pod(at: int, name: str, uid: str, min_available: int = 2) -> bytes:
    return json.dumps(pod_line(kube_pod(name, uid=uid, gang="g", min_available=min_available),
                               format_time(at))).encode()


def tick(text: str) -> bytes:
    return json.dumps({"schema": "gangstate.tick/v1", "observed_at": text}).encode()


def numbered(lines: list[bytes]) -> list[tuple[int, bytes]]:
    return list(enumerate(lines, start=1))


def test_a_2099_tick_in_a_trace_gives_exactly_the_diagnostics_of_the_trace_alone():
    # ns/g: 1 of minMember 2 at T0, the second pod 5 s later: the hold ends within the 10 s
    # grace, so no warning. A tick from 2099 between them used to fire the hold's timer:
    # "GangMembersInsufficient: 1 of minMember 2" (due T0+10 s), then GangMembersSatisfied.
    trace = [pod(T0, "g-0", "u-0"), pod(T0 + 5 * S, "g-1", "u-1")]
    alone = fold_lines(numbered(trace), AT)
    assert alone.diagnostics == [] and alone.set_aside == []
    for at in (AT, None):  # judged by --at, and by the rest of the trace
        hostile = fold_lines(numbered([trace[0], tick(FUTURE), trace[1]]), at)
        assert hostile.diagnostics == alone.diagnostics and hostile.commands == alone.commands
        assert hostile.to_json()["gangs"] == fold_lines(numbered(trace), at).to_json()["gangs"]
        assert [(n, t) for n, t, _ in hostile.set_aside] == [(2, FUTURE)]
        assert hostile.records == 3 and hostile.errors == []
    # 2099-01-01 is 4070908800 s, 2026-11-29 1795910400 s, 2026-11-02T09:00:05 1793610005 s
    assert fold_lines(numbered([trace[0], tick(FUTURE), trace[1]]), AT).set_aside[0][2] == (
        "observed_at 2099-01-01T00:00:00.000000Z is 2274998400 s ahead of --at "
        "2026-11-29T00:00:00.000000Z (at most 60 s, docs/contracts.md \"Limits\"): set aside, "
        "not folded")
    hostile = fold_lines(numbered([trace[0], tick(FUTURE), trace[1]]), None)
    assert hostile.set_aside[0][2] == (
        "observed_at 2099-01-01T00:00:00.000000Z is 2277298795 s ahead of the rest of the "
        "trace (line 3, after it, is at 2026-11-02T09:00:05.000000Z) (at most 60 s, "
        "docs/contracts.md \"Limits\"): set aside, not folded")
    assert hostile.to_json()["input"]["set_aside"] == [
        {"line": 2, "observed_at": FUTURE, "reason": hostile.set_aside[0][2]}]


def aside(times: list[int | None], at: int | None = None) -> list[int]:
    return [judged.position for judged in far_ahead(times, at, 60 * S)]


def test_a_jump_is_set_aside_when_the_trace_comes_back_and_folded_when_it_goes_on():
    # a gap: what follows is as late, or there is nothing after it
    assert aside([T0, T0 + 300 * S, T0 + 301 * S]) == []
    assert aside([T0, T0 + 300 * S]) == []
    assert aside([T0, T0 + 300 * S, T0 + 900 * S]) == []  # and a further gap
    # a spike: the trace comes back after it
    assert aside([T0, T0 + 3600 * S, T0 + 5 * S, T0 + 7 * S]) == [1]
    # a run of bad stamps (within the skew of each other) is set aside whole
    assert aside([T0, T0 + 9000 * S, T0 + 9010 * S, T0 + 5 * S]) == [1, 2]
    # late records (far behind the clock) are folded as usual and judge nothing
    assert aside([T0, T0 + 300 * S, T0 - 86_400 * S]) == []
    assert aside([T0, T0 + 3600 * S, T0 - 86_400 * S, T0 + 5 * S]) == [1]
    assert aside([T0 + i * S for i in range(100)] + [T0 - 86_400 * S]) == []  # no cascade
    # a gap followed by one straggler deep into the rest: the rest confirms the gap
    assert aside([T0, *(T0 + (300 + i) * S for i in range(100)), T0 + 2 * S]) == []
    # the bound is inclusive, as the worker's; lines with no record (None) are ignored
    assert aside([T0, T0 + 60 * S, T0]) == []
    assert aside([T0, T0 + 121 * S + 1, None, T0 + 60 * S]) == [1]


def test_records_more_than_the_skew_after_at_are_set_aside():
    assert aside([T0, T0 + 61 * S], at=T0) == [1]
    assert aside([T0, T0 + 60 * S], at=T0) == []
    assert aside([T0, T0 + 300 * S, T0 + 301 * S], at=T0 + 250 * S) == []
    judged = far_ahead([T0 + 5 * S, T0 + 400 * S], T0, 60 * S)
    assert judged == [SetAside(1, T0, True)]  # judged by --at: -1 names no record


def test_gangstate_fold_sets_the_2099_tick_aside_and_says_so(tmp_path):
    good = (CASES / "insufficient-members/trace.jsonl").read_bytes().splitlines()
    alone = tmp_path / "alone.jsonl"
    alone.write_bytes(b"\n".join(good) + b"\n")
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_bytes(b"\n".join(good[:1] + [tick(FUTURE)] + good[1:]) + b"\n")

    def fold(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "streams.cli", "fold", str(path),
                               "--at", "2026-11-29T00:00:00Z", *args],
                              capture_output=True, text=True, timeout=60)

    expected, got = fold(alone, "-o", "json"), fold(hostile, "-o", "json")
    assert expected.returncode == got.returncode == 0, got.stderr
    out, want = json.loads(got.stdout), json.loads(expected.stdout)
    assert out["diagnostics"] == want["diagnostics"] and out["commands"] == want["commands"]
    assert out["gangs"] == want["gangs"]
    assert [d["reason"] for d in out["diagnostics"]] == ["GangMembersInsufficient",
                                                         "GangMembersSatisfied"]
    assert "has 3 of minMember 4" in out["diagnostics"][0]["message"]  # not "1 of 4" (2099)
    assert [(s["line"], s["observed_at"]) for s in out["input"]["set_aside"]] == [(2, FUTURE)]
    assert f"{hostile}:2: observed_at {FUTURE} is 2274998400 s ahead of " in got.stderr
    text = fold(hostile)
    assert text.returncode == 0 and text.stdout == fold(alone).stdout
    assert f"{hostile}:2: observed_at {FUTURE}" in text.stderr and "set aside" in text.stderr


def test_the_cases_set_nothing_aside():
    # handed (2026-11-02) and recorded (2026-12-01) cases, folded after them and without at
    traces = sorted(CASES.glob("**/trace.jsonl"))
    assert any("recorded" in str(trace) for trace in traces)
    for trace in traces:
        lines = numbered(trace.read_bytes().splitlines())
        assert fold_lines(lines, parse_time("2026-12-31T00:00:00Z")).set_aside == [], trace
        assert fold_lines(lines, None).set_aside == [], trace
