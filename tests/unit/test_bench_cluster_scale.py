"""bench/cluster_scale.py's pure counting: quantiles, Prometheus sums, Event occurrences, the
Kafka lag's trend, the replay's calls and one phase's derived figures (no cluster needed)."""

from __future__ import annotations

from typing import Any

from bench.cluster_scale import (actions, lag_trend, metric_sum, occurrences, per_minute,
                                 phase_figures, pod_names, quantile_summary, table)
from bench.workload import Job

METRICS = """# HELP apiserver_request_total Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="pods",verb="POST"} 10
apiserver_request_total{code="200",resource="pods",verb="GET"} 500
apiserver_request_total{code="200",resource="events",verb="PATCH"} 4
apiserver_request_total{code="200",resource="pods",verb="DELETE"} 6
"""


def test_quantiles_are_nearest_rank() -> None:
    values = [float(i) for i in range(1, 101)]  # 1..100
    assert quantile_summary(values) == {"n": 100, "p50": 50.0, "p99": 99.0, "max": 100.0}
    # 3 values: p50 is the 2nd (ceil 1.5), p99 the 3rd (ceil 2.97)
    assert quantile_summary([0.3, 0.1, 0.2]) == {"n": 3, "p50": 0.2, "p99": 0.3, "max": 0.3}
    assert quantile_summary([])["p99"] is None


def test_metric_sum_by_label_values() -> None:
    assert metric_sum(METRICS, "apiserver_request_total",
                      {"verb": ("POST", "PUT", "PATCH", "DELETE", "APPLY")}) == 20
    assert metric_sum(METRICS, "apiserver_request_total") == 520
    assert metric_sum(METRICS, "apiserver_request_total", {"resource": ["events"]}) == 4


def test_occurrences_take_each_events_highest_count() -> None:
    seen = [
        {"uid": "a", "writer": "koord-scheduler", "reason": "FailedScheduling", "count": 1},
        {"uid": "a", "writer": "koord-scheduler", "reason": "FailedScheduling", "count": 7},
        {"uid": "a", "writer": "koord-scheduler", "reason": "FailedScheduling", "count": 5},
        {"uid": "b", "writer": "gangstate", "reason": "GangScheduled", "count": None},
        {"uid": "c", "writer": "gangstate", "reason": "GangScheduled", "count": 2},
    ]
    assert occurrences(seen) == {("koord-scheduler", "FailedScheduling"): 7,
                                 ("gangstate", "GangScheduled"): 3}


def test_lag_trend_tells_growth_from_breathing() -> None:
    breathing = [(float(t), float(v)) for t, v in enumerate([16, 26, 4, 18, 47, 117, 25, 0, 36])]
    got = lag_trend(breathing)
    assert got["max"] == 117 and got["last"] == 36 and got["growing"] is False
    growing = [(float(t), float(100 * t)) for t in range(9)]  # 0 .. 800
    # first third mean 100, last third mean 700 > 2 * 100 + 100
    assert lag_trend(growing)["growing"] is True
    assert lag_trend([])["growing"] is None


def test_replay_calls_in_time_order() -> None:
    a = Job("job-0", "team-1", 2, 1, 2, 1.0, 5.0)
    s = Job("strand-1", "team-2", 1, 1, 1, 2.0, 10.0, "stranded",
            groups=("team-2/strand-1-peer",), peer_delay_s=5.0)
    got = [(t, kind, j.gang) for t, kind, j in actions([s, a])]
    assert got == [(1.0, "create", "job-0"), (2.0, "create", "strand-1"),
                   (6.0, "delete", "job-0"), (7.0, "peer", "strand-1"),
                   (12.0, "delete", "strand-1")]
    assert pod_names(s) == ["strand-1-0", "strand-1-peer-0"]
    assert pod_names(a) == ["job-0-0", "job-0-1"]


def phase(**extra: Any) -> dict[str, Any]:
    events = [
        # gangstate: caused at 100.0, seen at 100.2 (record-caused); a timer reason 0.9 s
        {"uid": "g1", "ns": "gs-team-0", "writer": "gangstate", "reason": "GangScheduled",
         "count": 1, "seen": 100.2, "first": True, "stamped": 100.0, "caused": 100.0},
        {"uid": "g2", "ns": "gs-team-0", "writer": "gangstate", "reason": "GangMemberGated",
         "count": 1, "seen": 110.9, "first": True, "stamped": 110.0, "caused": 110.0},
        # scheduler: 3 occurrences of one Event, lag 0.5 s then 2.0 s
        {"uid": "s1", "ns": "gs-team-0", "writer": "koord-scheduler", "reason": "Scheduled",
         "count": 1, "seen": 101.5, "first": True, "stamped": 101.0, "caused": None},
        {"uid": "s1", "ns": "gs-team-0", "writer": "koord-scheduler", "reason": "Scheduled",
         "count": 3, "seen": 104.0, "first": False, "stamped": 102.0, "caused": None},
    ]
    return {"window_s": 60.0, "events": events,
            "cpu": {"kube-apiserver": (10.0, 16.0)}, "api_writes": (1000.0, 1100.0),
            "peak_rss_mib": {"kube-apiserver": 300.0}, "hwm_mib": {"kube-apiserver": 310.0},
            "late_max": 0.01, "pods_created": 5, **extra}


def test_phase_figures() -> None:
    got = phase_figures(phase(sink_writes=(0.0, 10.0), published=(0.0, 600.0),
                              published_peak=20.0, lag=[(0.0, 5.0), (5.0, 0.0)]))
    assert got["cause_to_event_s"]["n"] == 2
    assert got["cause_to_event_s"]["max"] == 0.9
    assert got["cause_to_event_record_caused_s"] == {"n": 1, "p50": 0.2, "p99": 0.2, "max": 0.2}
    assert got["scheduler_event_lag_s"]["max"] == 2.0
    assert got["scheduler_events_per_min"] == 3.0 and got["gangstate_events_per_min"] == 2.0
    assert got["noise_ratio"] == round(2 / 3, 4)
    assert got["cpu_s_per_min"] == {"kube-apiserver": 6.0}
    assert got["api_writes_per_min"] == 100.0
    assert got["sink_writes_per_min"] == 10.0 and got["sink_share_of_api_writes"] == 0.1
    assert got["watch_records_per_s"] == 10.0
    assert got["kafka_lag"]["max"] == 5.0
    text = table({"phases": {"base": phase_figures(phase()), "gs": got},
                  "relist": {"first_record_s": 1.0, "pods_s": 2.0, "pods": 5, "nodes_s": None,
                             "nodes": 10}})
    assert "| noise ratio (gangstate / scheduler Events) | - | 0.6667 |" in text
    assert "GangMemberGated (timer)" in text
    assert per_minute(5, 0) == 0.0


def test_explained_events_one_entry_per_event_its_last_sighting() -> None:
    from bench.cluster_scale import explained_events

    def s(uid: str, pod: str, reason: str, count: int, writer: str = "gangstate") -> dict[str, Any]:
        return {"uid": uid, "ns": "gs-team-0", "writer": writer, "reason": reason,
                "count": count, "pod": pod, "message": f"{reason} {count}"}

    seen = [s("e1", "b-0", "GangMembersStranded", 1), s("e2", "a-0", "GangSpecInvalid", 1),
            s("e1", "b-0", "GangMembersStranded", 2), s("e3", "a-0", "GangScheduled", 1),
            s("e4", "a-0", "FailedScheduling", 9, writer="koord-scheduler")]
    assert explained_events(seen) == [
        {"ns": "gs-team-0", "pod": "a-0", "reason": "GangSpecInvalid", "count": 1,
         "message": "GangSpecInvalid 1"},
        {"ns": "gs-team-0", "pod": "b-0", "reason": "GangMembersStranded", "count": 2,
         "message": "GangMembersStranded 2"}]


def test_table_shows_the_prefill() -> None:
    result = {"nodes": 100, "gpus_per_node": 8, "phases": {"base": {}, "gs": {}},
              "prefill": {"gangs": 606, "pods": 640, "gpus": 640, "create_s": 3.6,
                          "bound_s": 26.3, "unbound": 0},
              "settle": {"settle_s": 12.0, "sink_writes": 640}}
    out = table(result)
    assert "| 606 / 640 / 640 (0.800); 3.6 / 26.3 |" in out
    assert "chain settled in 12.0 s (640 sink writes)" in out


def test_pod_writers_counts_each_writers_events_on_the_pods_asked() -> None:
    from bench.cluster_scale import pod_writers

    seen = [{"uid": "f1", "ns": "n", "pod": "a-0", "writer": "koord-scheduler",
             "reason": "FailedScheduling", "count": 1},
            {"uid": "f1", "ns": "n", "pod": "a-0", "writer": "koord-scheduler",
             "reason": "FailedScheduling", "count": 4},
            {"uid": "g1", "ns": "n", "pod": "a-0", "writer": "gangstate",
             "reason": "GangMembersStranded", "count": 1},
            {"uid": "f2", "ns": "n", "pod": "b-0", "writer": "koord-scheduler",
             "reason": "Scheduled", "count": 1}]
    assert pod_writers(seen, {("n", "a-0")}) == {
        "n/a-0": {"gangstate/GangMembersStranded": 1, "koord-scheduler/FailedScheduling": 4}}
