"""The demo's report (``streams/dev/story.py``): the scheduler's Events counted per pod and
reason, and gangstate's Events per pod as the sink leaves them, on small hand-made logs."""

from __future__ import annotations

import json
from typing import Any

from streams.core.fold import FoldSettings
from streams.dev.story import cases_of, report, scheduler_events
from streams.wire.traces import fold_lines
from tests.fixtures.builders import kube_pod, pod_line



def pod(name: str, uid: str, at: str, *, node: str | None = None, type_: str = "ADDED",
        min_available: int = 2) -> dict[str, Any]:
    return pod_line(kube_pod(name, uid=uid, rv=str(len(at)), created=at, gang="g",
                             min_available=min_available, node=node), at, type_)


def event(uid: str, pod_name: str, pod_uid: str, at: str, message: str, *,
          count: int | None = None, series: int | None = None,
          reason: str = "FailedScheduling") -> dict[str, Any]:
    ev: dict[str, Any] = {"apiVersion": "v1", "kind": "Event",
                          "metadata": {"name": f"{pod_name}.{uid}", "namespace": "ns",
                                       "uid": uid},
                          "involvedObject": {"kind": "Pod", "namespace": "ns", "name": pod_name,
                                             "uid": pod_uid},
                          "reason": reason, "message": message, "type": "Warning",
                          "reportingComponent": "koord-scheduler", "eventTime": at}
    if count is not None:
        ev["count"] = count
    if series is not None:
        ev["series"] = {"count": series, "lastObservedTime": at}
    return {"schema": "gangstate.kube/v1", "observed_at": at, "resource": "events",
            "type": "ADDED", "object": ev}


def test_each_event_counts_as_often_as_it_happened_and_a_relist_counts_once() -> None:
    pods = cases_of([("c/trace.jsonl", 1, json.dumps(pod("a", "u-a", "2026-12-01T10:00:00Z"))
                      .encode())])[0].pods
    records = [
        event("e1", "a", "u-a", "2026-12-01T10:00:01Z", "0/2 nodes are available: first"),
        # a series of 3 (events.k8s.io/v1, series.count)
        event("e2", "a", "u-a", "2026-12-01T10:00:02Z", "second", series=3),
        # the same Event e1 seen again by a relist, its count now 2 (legacy count)
        event("e1", "a", "u-a", "2026-12-01T10:00:01Z", "0/2 nodes are available: first",
              count=2),
        event("e3", "a", "u-a", "2026-12-01T10:00:03Z", "Successfully assigned ns/a to n-0",
              reason="Scheduled"),
        # written while the pod was being deleted: counted, but no attempt, so not the latest
        event("e4", "a", "u-a", "2026-12-01T10:00:04Z", "skip schedule deleting pod: ns/a"),
    ]
    said = scheduler_events(records, pods)[("ns", "a", "u-a")]
    # e1 counts 2 (its last count), e2 counts 3, e4 1: 6 FailedScheduling; 1 Scheduled
    assert dict(said.counts) == {"FailedScheduling": 6, "Scheduled": 1}
    assert said.latest == "Successfully assigned ns/a to n-0"


def test_the_report_shows_the_silent_scheduler_and_gangstates_events_per_pod() -> None:
    """2 of minMember 3 for 30 s: the scheduler writes nothing (PreEnqueue hold); gangstate's
    GangMembersInsufficient lands on both pods once (after the 10 s grace), then the third pod
    ends the hold: GangMembersSatisfied on all three."""
    recs = [pod("a", "u-a", "2026-12-01T10:00:00Z", min_available=3),
            pod("b", "u-b", "2026-12-01T10:00:01Z", min_available=3),
            pod("c", "u-c", "2026-12-01T10:00:30Z", min_available=3)]
    lines = [("recorded/held/trace.jsonl", i, json.dumps(r).encode())
             for i, r in enumerate(recs, 1)]
    result = fold_lines(((n, raw) for _p, n, raw in lines), None, FoldSettings())
    text = report(cases_of(lines), result)
    assert text.splitlines() == [
        "== held",
        "gang ns/g  phase=Ready  members=3  minMember=3  bound=0  pods: a, b, c",
        "  koord-scheduler wrote: nothing (no Event, no condition)",
        "  gangstate wrote on a, b:",
        "    Warning GangMembersInsufficient: gang ns/g has 2 of minMember 3 pods; scheduling "
        "is held at PreEnqueue until 1 more exists",
        "    Normal GangMembersSatisfied: gang ns/g has 3 of minMember 3 pods; no longer held "
        "at PreEnqueue",
        "  gangstate wrote on c:",
        "    Normal GangMembersSatisfied: gang ns/g has 3 of minMember 3 pods; no longer held "
        "at PreEnqueue",
    ]


def test_a_recreated_pod_is_told_apart_by_uid_and_a_bound_pod_by_its_node() -> None:
    recs = [pod("a", "u-a1", "2026-12-01T10:00:00Z"),
            pod("a", "u-a1", "2026-12-01T10:00:05Z", type_="DELETED"),
            pod("a", "u-a2", "2026-12-01T10:00:06Z"),
            pod("b", "u-b", "2026-12-01T10:00:06Z"),
            pod("b", "u-b", "2026-12-01T10:00:07Z", node="node-1")]
    lines = [("x/trace.jsonl", i, json.dumps(r).encode()) for i, r in enumerate(recs, 1)]
    case = cases_of(lines)[0]
    result = fold_lines(((n, raw) for _p, n, raw in lines), None, FoldSettings())
    header = report([case], result).splitlines()[1]
    assert header.endswith("pods: a (uid u-a1) deleted, a (uid u-a2), b @node-1"), header
