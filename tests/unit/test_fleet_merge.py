"""Answers of several workers merged into one (``streams.query.answers.merged_gang_rows``,
``merged_fleet``): what a worker asked ``/gangs`` or ``/fleet`` serves once it gathered the
other workers' answers (``streams.worker.web``), with the values worked out by hand."""

from __future__ import annotations

from typing import Any

from streams.query.answers import FLEET_PHASES, merged_fleet, merged_gang_rows


def row(cluster: str, gangs: int, tick: str | None, *, scheduled: int = 0, degraded: int = 0,
        warnings: int = 0, storm: int = 0) -> dict[str, Any]:
    phases = {**dict.fromkeys(FLEET_PHASES, 0), "other": gangs - scheduled - degraded}
    phases.update(Scheduled=scheduled, Degraded=degraded)
    return {"cluster": cluster, "gangs": gangs, "phases": phases,
            "warning_gangs": min(warnings, gangs), "warnings": warnings,
            "failed_events_per_minute": storm, "last_tick": tick, "tick_behind_seconds": 0}


def test_each_cluster_is_summed_and_its_lag_counted_again() -> None:
    """Worker A owns 2 gangs of eu-1 (last tick 10:00:05) and 1 of us-2 (10:00:01); worker B
    owns 1 gang of eu-1 (10:00:04) and the only gang of default (no tick heard). Merged: eu-1
    has 3 gangs, its latest tick is A's 10:00:05, the newest of all, so 0 s behind; us-2 is
    4 s behind it (each worker alone said 0); default was heard by no one."""
    a = [row("eu-1", 2, "2026-12-05T10:00:05Z", scheduled=1, warnings=2, storm=7),
         row("us-2", 1, "2026-12-05T10:00:01Z", degraded=1, warnings=1)]
    b = [row("default", 1, None), row("eu-1", 1, "2026-12-05T10:00:04Z", scheduled=1,
                                      warnings=1, storm=5)]
    merged = merged_fleet([a, b])
    assert [(r["cluster"], r["gangs"], r["phases"]["Scheduled"], r["phases"]["Degraded"],
             r["phases"]["other"], r["warnings"], r["warning_gangs"],
             r["failed_events_per_minute"], r["last_tick"], r["tick_behind_seconds"])
            for r in merged] == [
        ("default", 1, 0, 0, 1, 0, 0, 0, None, None),
        ("eu-1", 3, 2, 0, 1, 3, 3, 12, "2026-12-05T10:00:05Z", 0),
        ("us-2", 1, 0, 1, 0, 1, 1, 0, "2026-12-05T10:00:01Z", 4)]
    # the answers merged are left as they were
    assert a[0]["gangs"] == 2 and a[0]["phases"]["Scheduled"] == 1


def test_one_answer_merged_is_itself() -> None:
    only = [row("eu-1", 2, "2026-12-05T10:00:05Z", scheduled=2)]
    assert merged_fleet([only]) == only
    assert merged_fleet([]) == []


def test_gang_rows_are_sorted_by_cluster_then_gang() -> None:
    a = [{"cluster": "eu-1", "gang": "team-b/x"}, {"cluster": "us-2", "gang": "team-a/y"}]
    b = [{"cluster": "default", "gang": "team-z/z"}, {"cluster": "eu-1", "gang": "team-a/w"}]
    assert [(r["cluster"], r["gang"]) for r in merged_gang_rows([a, b])] == [
        ("default", "team-z/z"), ("eu-1", "team-a/w"), ("eu-1", "team-b/x"),
        ("us-2", "team-a/y")]
