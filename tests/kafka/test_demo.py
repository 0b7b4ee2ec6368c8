"""``gangstate demo`` as a new user runs it (the README's first command), on the session's
broker: it replays the recorded cases, prints the story of each gang, and exits 0 because the
Kafka path and the offline fold agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.dev.demo import bundled_traces, run_demo
from streams.settings import Settings, Topics

pytestmark = pytest.mark.kafka
RECORDED = Path(__file__).resolve().parents[1] / "cases" / "recorded"


def scheduler_count(case: str, pod: str, reason: str) -> int:
    """How often koord-scheduler wrote ``reason`` on ``pod`` in the recording: per Event
    object (uid), the largest count it showed (``series.count`` or ``count``, else 1)."""
    seen: dict[str, int] = {}
    for line in (RECORDED / case / "trace.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("resource") != "events":
            continue
        ev = rec["object"]
        if ev["involvedObject"]["name"] != pod or ev["reason"] != reason:
            continue
        n = max((ev.get("series") or {}).get("count") or 0, ev.get("count") or 0, 1)
        seen[ev["metadata"]["uid"]] = max(seen.get(ev["metadata"]["uid"], 0), n)
    return sum(seen.values())


def test_the_demo_tells_the_recorded_story_and_agrees_with_the_offline_fold(
        kafka_bootstrap: str) -> None:
    assert [p.parent.name for p in bundled_traces()] == sorted(
        p.name for p in RECORDED.iterdir() if (p / "trace.jsonl").is_file())
    out: list[str] = []
    base = Settings(bootstrap=kafka_bootstrap, topics=Topics("demo-test."))
    assert run_demo(settings=base, write=out.append, timeout=180) == 0, "\n".join(out)
    text = "\n".join(out)
    assert "offline fold of the same traces: identical (" in out[-2], out[-2]
    # a PreEnqueue hold: the scheduler silent, gangstate's warning on both pods
    assert ("gang sc-too-few/train  phase=Gathering  members=2  minMember=3  bound=0  pods: "
            "train-0, "
            "train-1\n"
            "  koord-scheduler wrote: nothing (no Event, no condition)\n"
            "  gangstate wrote on train-0, train-1:\n"
            "    Warning GangMembersInsufficient: gang sc-too-few/train has 2 of minMember 3 "
            "pods; scheduling is held at PreEnqueue until 1 more exists\n") in text
    # the storm, counted per pod, beside gangstate's one explanation on every pod
    counts = {p: scheduler_count("gpu-short", p, "FailedScheduling")
              for p in ("gpu-0", "gpu-1", "gpu-2")}
    assert min(counts.values()) > 50, counts
    assert (f"  koord-scheduler wrote: FailedScheduling x{sum(counts.values())} (gpu-0 "
            f"x{counts['gpu-0']}, gpu-1 x{counts['gpu-1']}, gpu-2 x{counts['gpu-2']})") in text
    assert ("  gangstate wrote on gpu-0 deleted, gpu-1 deleted, gpu-2 deleted:\n"
            "    Warning GangUnschedulable: gang sc-gpu-short/gpu cannot be scheduled: gpu-0, "
            "gpu-1 and gpu-2 did not fit (Insufficient nvidia.com/gpu on 2 of 2 nodes); at "
            "most 2 of minMember 3 members fit at once;") in text
    # each pod's own Events, not one line per diagnostic: the two invalid settings once each
    assert text.count("GangSpecInvalid: gang sc-invalid/w: mode 'nonstrict'") == 1
    # the gated representative that gangstate un-sticks, with its command
    assert ("  gangstate command: SwitchRepresentative epoch 1: sh-gated-3/g-0 -> "
            "sh-gated-3/u-1 (RepresentativeGated)") in text
    # the recorded never-fitting gang with the shim: held (holds are on by default), released
    # when its pods were deleted
    assert ("  gangstate command: HoldGang epoch 1: gang group sh-gpu/g (GangCannotFit, ttl "
            "180 s)\n  gangstate command: ReleaseGang epoch 2: gang group sh-gpu/g "
            "(SpecChanged)\n") in text
    assert "MemberFailedCycle" not in text and "GangCycleRejected" not in text
