"""bench/holds.py's counting: the scheduler log's failed attempts in a window (klog headers), the
API server's write requests from its metrics text, the table's spread."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from bench.holds import api_writes, attempts, failed_gangs, klog_time, spread

YEAR = datetime.now().year
LINES = [
    'I1203 09:47:08.519499   13319 schedule_one.go:1066] "Unable to schedule pod; no fit; '
    'waiting" pod="hb-off-1/g0-1" err="0/2 nodes are available"',
    'I1203 09:47:09.000001   13319 schedule_one.go:1066] "Unable to schedule pod; no fit; '
    'waiting" pod="hb-off-1/g0-2" err="0/2 nodes are available"',
    'I1203 09:47:09.100000   13319 schedule_one.go:1066] "Unable to schedule pod; no fit; '
    'waiting" pod="other/g0-2" err="0/2 nodes are available"',
    'I1203 09:47:10.000000   13319 eventhandlers.go:1] "Add event for unscheduled pod" '
    'pod="hb-off-1/g0-0"',
    'I1203 09:47:11.250000   13319 schedule_one.go:1066] "Unable to schedule pod; no fit; '
    'waiting" pod="hb-off-1/g1-0" err="0/2 nodes are available"',
    "a line without a klog header",
]


class Cluster:
    """What the counting reads of a LocalCluster: the scheduler's log and ``GET /metrics``."""

    def __init__(self, log: Path, metrics: str = "") -> None:
        self.log, self.metrics = log, metrics

    def log_path(self, component: str) -> Path:
        assert component == "koord-scheduler"
        return self.log

    def get(self, path: str) -> Any:
        assert path == "/metrics"
        return self.metrics


def test_klog_time_reads_the_header_as_local_time_of_this_year() -> None:
    assert klog_time(LINES[0]) == datetime(YEAR, 12, 3, 9, 47, 8, 519499).timestamp()
    assert klog_time(LINES[-1]) is None


def test_attempts_count_the_namespace_s_failures_logged_in_the_window(tmp_path: Path) -> None:
    log = tmp_path / "koord-scheduler.log"
    log.write_text("\n".join(LINES) + "\n")
    cluster = Cluster(log)
    t = datetime(YEAR, 12, 3, 9, 47, 9).timestamp()
    # [09:47:09, 09:47:12): g0-2 at 09.000001 and g1-0 at 11.25; not other/, not the Add event
    assert attempts(cluster, "hb-off-1", t, t + 3) == 2
    assert attempts(cluster, "hb-off-1", t - 1, t + 3) == 3
    assert attempts(cluster, "hb-off-1", t + 0.5, t + 2) == 0
    assert failed_gangs(cluster, "hb-off-1") == {"g0", "g1"}


def test_api_writes_sum_the_write_verbs_of_every_resource(tmp_path: Path) -> None:
    metrics = "\n".join([
        "# HELP apiserver_request_total Counter of apiserver requests",
        "# TYPE apiserver_request_total counter",
        'apiserver_request_total{code="201",resource="events",verb="POST"} 2190',
        'apiserver_request_total{code="200",resource="pods",verb="PATCH"} 12',
        'apiserver_request_total{code="200",resource="leases",verb="PUT"} 30',
        'apiserver_request_total{code="200",resource="pods",verb="DELETE"} 3',
        'apiserver_request_total{code="200",resource="pods",verb="APPLY"} 1',
        'apiserver_request_total{code="200",resource="pods",verb="LIST"} 500',
        'apiserver_request_total{code="200",resource="pods",verb="WATCH"} 7',
        "# TYPE apiserver_request_duration_seconds histogram",
        'apiserver_request_duration_seconds_count{verb="POST"} 99', ""])
    assert api_writes(Cluster(tmp_path, metrics)) == 2190 + 12 + 30 + 3 + 1


def test_spread_is_the_median_and_the_range() -> None:
    assert spread([0.3, 0.1, 0.2, 0.25]) == "0.23 (0.10-0.30)"
    assert spread([]) == "-"
