"""Tests of the watch producer (``producers.watch.watching``).

Pure parts (stream plan, relist diff, backoff, routing) are tables of named scenarios. The shell
runs against the TEST API SERVER (``tests.doubles.apiserver``, a test double driven through the
real ``kubernetes`` client) with an in-memory publisher; the published stream is folded with
``streams.wire.traces.fold_lines`` and compared with the test API server's final state, or with the
handed traces folded directly.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import tenacity
from kubernetes import client

from producers.watch.watching import (Backoff, DeadLetter, Drop, GangRouter, Publish, StreamSpec,
                             WatchConfig, Watcher, plan_streams, relist_diff)
from streams.settings import Settings, Topics
from streams.core.capacity import Toleration
from streams.core.spec import gang_of_pod
from streams.core.timefmt import parse_time
from streams.wire.traces import fold_lines
from tests.doubles.apiserver import ApiServerDouble, eventually
from tests.fixtures.builders import kube_pod

CASES = Path(__file__).resolve().parents[1] / "cases"
SETTINGS = Settings(bootstrap=None, topics=Topics("test."))
FAST = WatchConfig(read_timeout=35.0, watch_timeout=30, backoff_base=0.02, backoff_cap=0.2,
                   tick_interval=None, flush_interval=0.05, hold_events=0.3, crd_recheck=60.0,
                   capacity=False)  # the Node and bound-pod streams: test_capacity_streams_*
T0 = parse_time("2026-11-02T09:00:00Z")


class MemoryPublisher:
    """An in-memory stand-in for ``streams.kafka.publishing.Publisher``: ``send``/``send_json``/
    ``flush``; keeps ``(topic, key, record)`` in order. ``fail_next`` makes that many sends
    raise, as kafka-python does when the broker is down."""

    def __init__(self) -> None:
        self.records: list[tuple[str, str | None, dict[str, Any]]] = []
        self.fail_next = 0
        self.flushes = 0

    def send(self, topic: str, key: str | None, value: bytes,
             partition: int | None = None) -> None:
        if self.fail_next > 0:
            self.fail_next -= 1
            raise ConnectionError("broker down (test)")
        self.records.append((topic, key, json.loads(value)))

    def send_json(self, topic: str, key: str | None, record: dict[str, Any],
                  partition: int | None = None) -> None:
        self.send(topic, key, json.dumps(record).encode(), partition)

    def flush(self) -> None:
        self.flushes += 1

    def on(self, topic: str) -> list[tuple[str | None, dict[str, Any]]]:
        """``(key, record)`` sent to ``topic``, in order."""
        return [(k, r) for t, k, r in list(self.records) if t == topic]

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """The ``gang-events`` records as numbered lines for ``fold_lines``."""
        for n, (_, record) in enumerate(self.on(SETTINGS.topics.gang_events), start=1):
            yield n, json.dumps(record).encode()


def pod(name: str, gang: str | None = "train", ns: str = "team-a", *, min_available: str = "2",
        scheduler: str = "koord-scheduler", node: str | None = None) -> dict[str, Any]:
    return kube_pod(name, ns, uid=None, rv=None, gang=gang,
                    min_available=min_available if gang else None, scheduler=scheduler,
                    node=node)


def event(name: str, pod_obj: dict[str, Any], reason: str, message: str,
          component: str = "koord-scheduler",
          when: str = "2026-11-02T09:00:10Z") -> dict[str, Any]:
    meta = pod_obj["metadata"]
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": meta["namespace"], "uid": f"uid-{name}"},
            "involvedObject": {"kind": "Pod", "namespace": meta["namespace"],
                               "name": meta["name"], "uid": meta.get("uid", "")},
            "reason": reason, "message": message, "type": "Warning",
            "source": {"component": component}, "lastTimestamp": when, "count": 1}


def api_client(server: ApiServerDouble) -> client.ApiClient:
    return client.ApiClient(server.configuration())


def members_by_gang_in_server(server: ApiServerDouble) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in server.objects("pods"):
        meta = p["metadata"]
        if p["spec"].get("schedulerName") != "koord-scheduler":
            continue
        gang = gang_of_pod(meta["namespace"], meta.get("labels") or {},
                           meta.get("annotations") or {})
        if gang:
            out.setdefault(gang, set()).add(meta["uid"])
    return out


def members_by_gang_folded(publisher: MemoryPublisher) -> dict[str, set[str]]:
    result = fold_lines(publisher.lines(), None)
    assert not result.errors, result.errors
    return {g: set(s.members) for g, s in result.states.items() if s.members}


# ---------------------------------------------------------------------------------------------
# Pure parts
# ---------------------------------------------------------------------------------------------

def test_plan_streams_one_selector_per_scheduler_and_reason() -> None:
    config = WatchConfig(namespaces=("a", "b"), scheduler_names=("koord-scheduler", "s2"))
    assert plan_streams(config) == [
        StreamSpec("pods", "a", "spec.schedulerName=koord-scheduler"),
        StreamSpec("pods", "a", "spec.schedulerName=s2"),
        StreamSpec("pods", "b", "spec.schedulerName=koord-scheduler"),
        StreamSpec("pods", "b", "spec.schedulerName=s2"),
        StreamSpec("podgroups", "a", ""), StreamSpec("podgroups", "b", ""),
        # Kubernetes' own gangs (v1.37): PodGroups, CompositePodGroups, Workloads
        StreamSpec("podgroups", "a", "", "scheduling.k8s.io/v1beta1"),
        StreamSpec("compositepodgroups", "a", "", "scheduling.k8s.io/v1alpha3"),
        StreamSpec("workloads", "a", "", "scheduling.k8s.io/v1beta1"),
        StreamSpec("podgroups", "b", "", "scheduling.k8s.io/v1beta1"),
        StreamSpec("compositepodgroups", "b", "", "scheduling.k8s.io/v1alpha3"),
        StreamSpec("workloads", "b", "", "scheduling.k8s.io/v1beta1"),
        # the room on nodes is cluster-wide, whatever the namespaces
        StreamSpec("nodes", None, ""), StreamSpec("boundpods", None, "spec.nodeName!="),
        StreamSpec("events", "a", "involvedObject.kind=Pod,reason=FailedScheduling"),
        StreamSpec("events", "a", "involvedObject.kind=Pod,reason=Scheduled"),
        StreamSpec("events", "a", "involvedObject.kind=Pod,reason=Preempted"),
        StreamSpec("events", "b", "involvedObject.kind=Pod,reason=FailedScheduling"),
        StreamSpec("events", "b", "involvedObject.kind=Pod,reason=Scheduled"),
        StreamSpec("events", "b", "involvedObject.kind=Pod,reason=Preempted"),
    ]
    # by default the pods of koord-scheduler and of kube-scheduler's default profile
    assert plan_streams(WatchConfig(podgroups=False, native=False, capacity=False,
                                    event_reasons=())) == [
        StreamSpec("pods", None, "spec.schedulerName=koord-scheduler"),
        StreamSpec("pods", None, "spec.schedulerName=default-scheduler")]
    assert [s.name for s in plan_streams(WatchConfig(podgroups=False, capacity=False,
                                                     event_reasons=()))][2:] == [
        "podgroups.scheduling.k8s.io/v1beta1[ns=*,]",
        "compositepodgroups.scheduling.k8s.io/v1alpha3[ns=*,]",
        "workloads.scheduling.k8s.io/v1beta1[ns=*,]"]


def _obj(uid: str, name: str, rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": name, "namespace": "ns", "resourceVersion": rv}}


RELIST = [
    ("first list: everything is SYNC", {}, [_obj("u1", "a")], [("SYNC", "u1", "1")]),
    ("unchanged and changed objects are SYNC with the listed state",
     {"u1": _obj("u1", "a", "1")}, [_obj("u1", "a", "5")], [("SYNC", "u1", "5")]),
    ("vanished objects are DELETED with their last known state, sorted by name",
     {"u2": _obj("u2", "b", "3"), "u1": _obj("u1", "a", "2"), "u3": _obj("u3", "c")},
     [_obj("u3", "c", "7")],
     [("SYNC", "u3", "7"), ("DELETED", "u1", "2"), ("DELETED", "u2", "3")]),
    ("same name, new uid: the old uid is DELETED",
     {"u1": _obj("u1", "a", "2")}, [_obj("u9", "a", "8")],
     [("SYNC", "u9", "8"), ("DELETED", "u1", "2")]),
    ("empty list deletes everything", {"u1": _obj("u1", "a")}, [], [("DELETED", "u1", "1")]),
]


@pytest.mark.parametrize("known,listed,expected", [r[1:] for r in RELIST],
                         ids=[r[0] for r in RELIST])
def test_relist_diff(known: dict[str, Any], listed: list[dict[str, Any]],
                     expected: list[tuple[str, str, str]]) -> None:
    got = [(t, o["metadata"]["uid"], o["metadata"]["resourceVersion"])
           for t, o in relist_diff(known, listed)]
    assert got == expected


@pytest.mark.parametrize("attempt,rand,expected", [
    (0, 0.5, 0.25), (1, 0.5, 0.5), (3, 1.0, 4.0), (10, 1.0, 30.0), (100, 0.5, 15.0),
    (2, 0.0, 0.0),
], ids=["first", "second", "grows", "capped", "huge attempt capped", "jitter can be 0"])
def test_backoff_full_jitter(attempt: int, rand: float, expected: float) -> None:
    # the sends' schedule (0.5 s doubling to 30 s): rand * min(30, 0.5 * 2**attempt)
    state = tenacity.RetryCallState(None, None, (), {})
    state.attempt_number = attempt + 1  # tenacity counts attempts from 1
    assert Backoff(0.5, 30.0, lambda: rand)(state) == pytest.approx(expected)


def _with_uid(obj: dict[str, Any], uid: str, rv: str = "10") -> dict[str, Any]:
    obj["metadata"]["uid"] = uid
    obj["metadata"]["resourceVersion"] = rv
    return obj


def test_router_publishes_gang_pods_keyed_by_gang_and_drops_others() -> None:
    r = GangRouter()
    gang_pod = _with_uid(pod("w-0"), "u0")
    other = _with_uid(pod("web", gang=None), "u1")
    assert r.route("pods", "ADDED", gang_pod, None, T0) == [
        Publish("team-a/train", {"schema": "gangstate.kube/v1",
                                 "observed_at": "2026-11-02T09:00:00.000000Z",
                                 "resource": "pods", "type": "ADDED", "object": {
                                     # published: the fold's fields only (the containers
                                     # stay out of gang-events; schedulerName tells a
                                     # native gang member from koord-scheduler's)
                                     "apiVersion": "v1", "kind": "Pod",
                                     "metadata": {"name": "w-0", "namespace": "team-a",
                                                  "uid": "u0", "resourceVersion": "10",
                                                  "annotations": {
                                         "gang.scheduling.koordinator.sh/name": "train",
                                         "gang.scheduling.koordinator.sh/min-available": "2"}},
                                     "spec": {"schedulerName": "koord-scheduler"},
                                     "status": {"phase": "Pending"}}})]
    assert r.route("pods", "ADDED", other, None, T0) == [Drop("no-gang")]


def test_router_pod_leaving_its_gang_is_deleted_from_the_old_gang() -> None:
    r = GangRouter()
    before = _with_uid(pod("w-0"), "u0", "10")
    r.route("pods", "ADDED", before, None, T0)
    after = _with_uid(pod("w-0", gang="other"), "u0", "11")
    actions = r.route("pods", "MODIFIED", after, before, T0)
    assert [(a.key, a.record["type"], a.record["object"]["metadata"]["resourceVersion"])
            for a in actions if isinstance(a, Publish)] == [
        ("team-a/train", "DELETED", "11"), ("team-a/other", "MODIFIED", "11")]


def test_router_failed_scheduling_becomes_a_cycle_record() -> None:
    r = GangRouter()
    p = _with_uid(pod("w-1"), "u1")
    r.route("pods", "ADDED", p, None, T0)
    ev = event("w-1.1", p, "FailedScheduling",
               'GangGroup "team-a/train" gets rejected due to member Pod "w-0" is '
               'unschedulable with reason "0/2 nodes are available: 2 Insufficient cpu.", '
               'alreadyWaitForBound: 1')
    actions = r.route("events", "ADDED", ev, None, T0 + 5_000_000)
    assert [type(a).__name__ for a in actions] == ["Publish", "Publish"]
    assert actions[0].record["resource"] == "events"
    cycle = actions[1].record
    assert actions[1].key == "team-a/train"
    assert {k: cycle[k] for k in ("schema", "observed_at", "scheduler", "cycle", "pod", "gang",
                                  "gang_group", "stage", "status", "reason", "node",
                                  "source")} == {
        "schema": "gangstate.cycle/v1", "observed_at": "2026-11-02T09:00:05.000000Z",
        "scheduler": "koord-scheduler",
        "cycle": None,  # Events carry no cycle number; the second they happened is none either
        "pod": {"namespace": "team-a", "name": "w-1", "uid": "u1"},
        "gang": "team-a/train", "gang_group": "team-a/train", "stage": "PostFilter",
        "status": "Rejected", "reason": "GangGroupRejected", "node": None,
        "source": {"event": "team-a/w-1.1", "uid": "uid-w-1.1", "count": 1, "parsed": True,
                   "form": "F3"}}
    # the culprit, its fit error and Koordinator's count of waiting members (catalogue row F3)
    assert (cycle["culprit"], cycle["fit_error"], cycle["already_wait_for_bound"]) == (
        "team-a/w-0", "0/2 nodes are available: 2 Insufficient cpu.", 1)


def test_router_drops_an_event_that_reports_no_attempt() -> None:
    """``skip schedule deleting pod`` (kube-scheduler v1.35.2 schedule_one.go:399-404): the
    Event is published, no cycle record is derived from it."""
    r = GangRouter()
    p = _with_uid(pod("w-1"), "u1")
    r.route("pods", "ADDED", p, None, T0)
    actions = r.route("events", "ADDED", event("w-1.2", p, "FailedScheduling",
                                               "skip schedule deleting pod: team-a/w-1"),
                      None, T0)
    assert [type(a).__name__ for a in actions] == ["Publish", "Drop"]
    assert actions[1] == Drop("not-an-attempt")


@pytest.mark.parametrize("fields,count", [
    ({}, 1), ({"count": 3}, 3), ({"series": {"count": 2}}, 2),
    ({"count": 1, "series": {"count": 5, "lastObservedTime": "2026-11-02T09:00:10.000000Z"}}, 5),
    ({"count": 0}, 1), ({"count": "4"}, 1), ({"series": None, "count": 2}, 2),
], ids=["neither", "legacy count", "series", "series wins", "zero", "not a number",
        "null series"])
def test_router_cycle_record_counts_the_event_from_series_or_count(
        fields: dict[str, Any], count: int) -> None:
    r = GangRouter()
    p = _with_uid(pod("w-1"), "u1")
    r.route("pods", "ADDED", p, None, T0)
    ev = {k: v for k, v in event("e", p, "FailedScheduling", "x").items() if k != "count"}
    [_, cycle] = r.route("events", "MODIFIED", {**ev, **fields}, None, T0)
    assert isinstance(cycle, Publish)
    assert cycle.record["source"]["count"] == count


def test_router_dead_letters_an_event_without_a_uid() -> None:
    r = GangRouter()
    p = _with_uid(pod("w-1"), "u1")
    r.route("pods", "ADDED", p, None, T0)
    ev = event("e", p, "FailedScheduling", "x")
    del ev["metadata"]["uid"]
    [letter] = r.route("events", "ADDED", ev, None, T0)
    assert isinstance(letter, DeadLetter) and letter.reason == "malformed"
    assert "metadata.uid" in letter.error


ROUTED_EVENTS = [
    ("Event of a scheduler not followed", {"source": {"component": "volcano"}},
     [Drop("other-scheduler")]),
    # kube-scheduler's default profile is followed by default (its own gangs)
    ("default-scheduler's Event", {"source": {"component": "default-scheduler"}},
     ["Publish", "Publish"]),
    ("reason not watched", {"reason": "Killing"}, [Drop("event-reason")]),
    ("reportingComponent wins over source", {"reportingComponent": "koord-scheduler",
                                             "source": {"component": "kubelet"}},
     ["Publish", "Publish"]),
]


@pytest.mark.parametrize("change,expected", [r[1:] for r in ROUTED_EVENTS],
                         ids=[r[0] for r in ROUTED_EVENTS])
def test_router_event_filters(change: dict[str, Any], expected: list[Any]) -> None:
    r = GangRouter()
    p = _with_uid(pod("w-1"), "u1")
    r.route("pods", "ADDED", p, None, T0)
    ev = {**event("e", p, "FailedScheduling", "0/1 nodes are available: 1 Insufficient cpu."),
          **change}
    got = r.route("events", "ADDED", ev, None, T0)
    assert [a if isinstance(a, Drop) else type(a).__name__ for a in got] == expected


def test_router_holds_events_of_unseen_pods_then_routes_or_drops_them_as_pod_gone() -> None:
    r = GangRouter(hold_events=2.0)
    early = _with_uid(pod("w-2"), "u2")
    assert r.route("events", "ADDED", event("e1", early, "FailedScheduling", "x"), None, T0) == []
    # the pod shows up within the hold: the Event is routed with it
    actions = r.route("pods", "ADDED", early, None, T0 + 1_000_000)
    assert [a.record["schema"] for a in actions if isinstance(a, Publish)] == [
        "gangstate.kube/v1", "gangstate.kube/v1", "gangstate.cycle/v1"]
    ghost = _with_uid(pod("ghost"), "u9")
    assert r.route("events", "ADDED", event("e2", ghost, "FailedScheduling", "x"), None,
                   T0) == []
    assert r.expire(T0 + 1_999_999) == []
    gone = r.expire(T0 + 2_000_000)
    assert gone == [Drop("pod-gone")]  # no dead letter: an Event of a gone pod is no bad input
    assert gone[0].detail == "Event e2: pod team-a/ghost (uid u9) is gone"
    assert r.held == {} and r.expire(T0 + 10_000_000) == []


def test_router_keeps_the_due_time_of_an_event_of_an_older_pod_of_the_same_name() -> None:
    """A pod recreated under the same name (new uid) does not extend the hold of an Event of
    the old uid: that Event is dropped when its own hold ends."""
    r = GangRouter(hold_events=2.0)
    old = _with_uid(pod("w-0"), "old-uid")
    assert r.route("events", "SYNC", event("e-old", old, "FailedScheduling", "x"), None,
                   T0) == []
    new = _with_uid(pod("w-0"), "new-uid")
    assert [type(a).__name__ for a in r.route("pods", "ADDED", new, None, T0 + 1_500_000)] == [
        "Publish"]  # the new pod only; the old uid's Event stays held
    assert r.expire(T0 + 1_999_999) == []
    assert r.expire(T0 + 2_000_000) == [Drop("pod-gone")]


def test_router_dead_letters_an_event_without_an_involved_pod_name() -> None:
    r = GangRouter()
    ev = event("e", _with_uid(pod("w-0"), "u0"), "FailedScheduling", "x")
    ev["involvedObject"] = {"kind": "Pod", "namespace": "team-a"}
    [letter] = r.route("events", "ADDED", ev, None, T0)
    assert isinstance(letter, DeadLetter) and letter.reason == "malformed"
    assert letter.record["object"]["metadata"]["name"] == "e"
    assert r.held == {}


REAL = Path(__file__).resolve().parents[1] / "data" / "koord-v1.8.0-gpu-short-excerpt.json"


def real_items(kind: str) -> list[dict[str, Any]]:
    """Items of one kind from the excerpt of the real koord-scheduler v1.8.0 recording
    (tests/data/README.md), in recorded order."""
    return [i for i in json.loads(REAL.read_text())["items"] if i["kind"] == kind]


def test_router_relist_of_real_events_drops_those_of_gone_pods() -> None:
    """A watcher (re)start lists every stored Event. In the real recording 5 of the 47 Events
    belong to an earlier incarnation of the gang's pods (same names, other uids, deleted): they
    are dropped as pod-gone when the hold ends, none is dead-lettered; the 42 Events of the
    live pods each give a kube record and a cycle record; each of the 3 pods' own
    ``PodScheduled=False`` condition (reason Unschedulable, the latest attempt's message) one
    more cycle record (``source.kind`` condition)."""
    r = GangRouter(hold_events=10.0)
    pods, events = real_items("Pod"), real_items("Event")
    assert (len(pods), len(events)) == (3, 47)
    actions = [a for p in pods for a in r.route("pods", "SYNC", p, None, T0)]
    actions += [a for e in events for a in r.route("events", "SYNC", e, None, T0 + 1_000_000)]
    assert sum(len(v) for v in r.held.values()) == 5
    actions += r.expire(T0 + 10_999_999)
    assert sum(len(v) for v in r.held.values()) == 5  # held 10 s from when they were seen
    actions += r.expire(T0 + 11_000_000)
    assert r.held == {}
    kinds = [type(a).__name__ if not isinstance(a, Drop) else a.reason for a in actions]
    assert kinds.count("DeadLetter") == 0
    assert kinds.count("pod-gone") == 5
    published = [a.record["schema"] for a in actions if isinstance(a, Publish)]
    assert published.count("gangstate.kube/v1") == 3 + 42
    assert published.count("gangstate.cycle/v1") == 42 + 3
    kinds_of_source = [a.record["source"].get("kind", "event") for a in actions
                       if isinstance(a, Publish) and a.record["schema"] == "gangstate.cycle/v1"]
    assert kinds_of_source[:3] == ["condition"] * 3 and kinds_of_source.count("condition") == 3


def test_router_remembers_deleted_pods_for_late_events() -> None:
    r = GangRouter(remember_deleted=60.0)
    p = _with_uid(pod("w-3"), "u3")
    r.route("pods", "ADDED", p, None, T0)
    r.route("pods", "DELETED", p, p, T0 + 1_000_000)
    late = r.route("events", "ADDED", event("e", p, "FailedScheduling", "x"), None,
                   T0 + 30_000_000)
    assert [type(a).__name__ for a in late] == ["Publish", "Publish"]
    r.expire(T0 + 62_000_000)
    assert r.route("events", "ADDED", event("e", p, "FailedScheduling", "x"), None,
                   T0 + 62_000_000) == []  # forgotten: held, then dropped as pod-gone
    assert r.expire(T0 + 72_000_000) == [Drop("pod-gone")]


def _as_created(pod: dict[str, Any]) -> dict[str, Any]:
    """A recorded Pod as it was listed before the scheduler tried it: without the
    ``PodScheduled`` condition it carries at the end of the recording (the condition's
    records are tested on their own)."""
    status = {k: v for k, v in (pod.get("status") or {}).items() if k != "conditions"}
    return {**pod, "status": status}


def _route_real(router: GangRouter, type_: str) -> list[tuple[str, dict[str, Any]]]:
    """The excerpt's Pods as created (SYNC), then its Events in recorded order, each at its
    own time, as a live watch would see them; returns the published ``(key, record)``."""
    pods, events = [_as_created(p) for p in real_items("Pod")], real_items("Event")
    actions = [a for p in pods for a in router.route("pods", "SYNC", p, None, T0)]
    for e in events:
        actions += router.route("events", type_, e, None, parse_time(e["eventTime"]))
    return [(a.key, a.record) for a in actions if isinstance(a, Publish)]


def _fold(published: list[tuple[str, dict[str, Any]]]) -> Any:
    return fold_lines(((n, json.dumps(r).encode()) for n, (_, r) in
                       enumerate(published, start=1)), None)


def test_real_events_become_attempts_without_cycle_numbers() -> None:
    """The real gang sc-b/gb (3 pods, 2 GPUs in the cluster) fails about once per second per
    pod. Its 42 Events in the excerpt become 42 cycle records without a cycle number, each
    identified by its Event; 11 Events are events.k8s.io series (count 2). The fold reports
    its failure episode once, never with a cycle number: the episode starts with the first
    Event (gb-1, 03:41:27.291286, its own fit error) and its GangUnschedulable is due 10 s later
    (03:41:37.291286, fired before item 3116 applies): by then gb-1 (item 2754), gb-2 (2757) and
    gb-0 (2759) have each failed on their own with Insufficient nvidia.com/gpu on 2 of 2 nodes,
    at most 2 members waited at once (alreadyWaitForBound 2, item 2755), 15 own fit errors =
    15 failed rounds, 40 attempts in the minute. Item 3116 (a round end, no longer read as a fit
    reason) and 3126 (an Unreserve release) change no fact."""
    published = _route_real(GangRouter(), "ADDED")
    cycles = [r for _, r in published if r["schema"] == "gangstate.cycle/v1"]
    assert len(cycles) == 42 and {r["cycle"] for r in cycles} == {None}
    assert cycles[0]["source"] == {"event": "sc-b/gb-1.18ed043d3353060b",
                                   "uid": "fea11e49-5f60-482d-9e9d-c78d560d25d0", "count": 2,
                                   "parsed": True, "form": "FIT"}
    assert sum(r["source"]["count"] == 2 for r in cycles) == 11
    outcomes = [(r["status"], r["reason"]) for r in cycles]
    # by catalogue row: 15 own fit errors (FIT), 16 releases (F3) and 1 in Unreserve (U1),
    # 9 PreFilter refusals (B2), 1 round end (N1)
    assert {o: outcomes.count(o) for o in set(outcomes)} == {
        ("Unschedulable", "Insufficient nvidia.com/gpu"): 15,
        ("Rejected", "GangGroupRejected"): 17,
        ("UnschedulableAndUnresolvable", "GangGroupRejected"): 9,
        ("Rejected", "GangRoundEnded"): 1}
    result = _fold(published)
    assert not result.errors
    gpu = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    assert [(d["observed_at"], d["reason"], d["facts"], d["message"])
            for d in result.diagnostics] == [
        ("2026-12-01T03:41:37.291286Z", "GangUnschedulable",
         {"unfit": {"gb-0": gpu, "gb-1": gpu, "gb-2": gpu}, "fit": 2, "min_member": 3,
          "since": "2026-12-01T03:41:27.291286Z", "rounds": 15, "attempts_per_minute": 40},
         "gang sc-b/gb cannot be scheduled: gb-0, gb-1 and gb-2 did not fit (Insufficient "
         "nvidia.com/gpu on 2 of 2 nodes); at most 2 of minMember 3 members fit at once; the "
         "scheduler rejects the whole gang and retries it")]
    state = result.states["sc-b/gb"]
    assert state.cycle is None
    assert {m.name: (m.status, m.reason) for m in state.members.values()} == {
        "gb-0": ("Rejected", "GangGroupRejected"),                  # item 2790
        "gb-1": ("Unschedulable", "Insufficient nvidia.com/gpu"),   # item 2792
        "gb-2": ("Rejected", "GangGroupRejected")}                  # item 3126, Unreserve


RECORDING = Path(__file__).resolve().parents[3] / "shared" / "data" / "koord-v1.8.0" / \
    "gpu-short.json.gz"
GPU_FIT = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
RECORDING_MESSAGE = (
    "gang sc-b/gb cannot be scheduled: gb-0, gb-1 and gb-2 did not fit (Insufficient "
    "nvidia.com/gpu on 2 of 2 nodes); at most 2 of minMember 3 members fit at once; the "
    "scheduler rejects the whole gang and retries it")


def _recording() -> list[dict[str, Any]]:
    if not RECORDING.exists():
        pytest.skip(f"{RECORDING} is not on this machine")
    import gzip
    return json.loads(gzip.decompress(RECORDING.read_bytes()))["items"]


def _route_recording(items: list[dict[str, Any]], repeats: int = 1
                     ) -> list[tuple[str, dict[str, Any]]]:
    """The recording's Pods as created (SYNC), then its Events at their own times; with ``repeats`` > 1
    the Events of the current pods are played again after the end, shifted by the span they
    cover plus 1 s each time (new Event uids), as a longer storm of the same gang."""
    router = GangRouter()
    pods = [_as_created(i) for i in items if i["kind"] == "Pod"]
    events = [i for i in items if i["kind"] == "Event"]
    actions = [a for p in pods for a in router.route("pods", "SYNC", p, None, T0)]
    for e in events:
        actions += router.route("events", "ADDED", e, None, parse_time(e["eventTime"]))
    current = {p["metadata"]["uid"] for p in pods}
    mine = [e for e in events if e["involvedObject"]["uid"] in current]
    first, last = parse_time(mine[0]["eventTime"]), parse_time(mine[-1]["eventTime"])
    for n in range(1, repeats):
        shift = n * (last - first + 1_000_000)
        for e in mine:
            copy = {**e, "metadata": {**e["metadata"], "uid": f"{e['metadata']['uid']}-{n}"}}
            actions += router.route("events", "ADDED", copy, None,
                                    parse_time(e["eventTime"]) + shift)
    return [(a.key, a.record) for a in actions if isinstance(a, Publish)]


def test_the_whole_real_recording_is_one_diagnostic() -> None:
    """All 4,441 Events of the recording: those of the deleted first pods (items 0-2753,
    their uids are not among the listed Pods) are held and never become records; the 1,687
    Events of the current pods (items 2754-4440) become 1,687 attempts, read without one
    unparsed, and one GangUnschedulable (before the message catalogue: three GangCycleRejected,
    one calling "all pending pods is already been attempted" a fit reason). The episode counts
    every own fit error as a round and the one round end (item 3116) as one more."""
    published = _route_recording(_recording())
    cycles = [r for _, r in published if r["schema"] == "gangstate.cycle/v1"]
    assert len(cycles) == 1687 and all(r["source"]["parsed"] for r in cycles)
    result = _fold(published)
    assert [(d["observed_at"], d["reason"], d["message"]) for d in result.diagnostics] == [
        ("2026-12-01T03:41:37.291286Z", "GangUnschedulable", RECORDING_MESSAGE)]
    facts = result.diagnostics[0]["facts"]
    assert {k: facts[k] for k in ("unfit", "fit", "min_member", "since")} == {
        "unfit": {"gb-0": GPU_FIT, "gb-1": GPU_FIT, "gb-2": GPU_FIT}, "fit": 2,
        "min_member": 3, "since": "2026-12-01T03:41:27.291286Z"}
    ep = result.states["sc-b/gb"].episode
    own = sum(r["source"]["form"] == "FIT" for r in cycles)
    assert (ep.rounds, own) == (own + 1, 536)


def test_five_minutes_of_the_real_storm_are_one_diagnostic() -> None:
    """issue 14's Done-when: the current pods' Events played 6 times over (about 6 minutes of
    a gang that can never fit, ~10,000 attempts): still the one diagnostic, at most 3."""
    published = _route_recording(_recording(), repeats=6)
    cycles = [r for _, r in published if r["schema"] == "gangstate.cycle/v1"]
    span = parse_time(cycles[-1]["observed_at"]) - parse_time(cycles[0]["observed_at"])
    assert span > 300_000_000 and len(cycles) == 6 * 1687
    result = _fold(published)
    assert [(d["reason"], d["message"]) for d in result.diagnostics] == [
        ("GangUnschedulable", RECORDING_MESSAGE)]


def test_a_relist_of_real_events_is_recognised_and_a_repeat_is_not() -> None:
    """A watcher restart lists the same Events again (SYNC, later): the same attempts, so the
    fold changes nothing. The same Event listed with one more occurrence (series.count 3) is a
    new attempt."""
    first = _route_real(GangRouter(), "ADDED")
    again = _route_real(GangRouter(), "SYNC")
    assert [r["source"] for _, r in again if r["schema"] == "gangstate.cycle/v1"] == \
        [r["source"] for _, r in first if r["schema"] == "gangstate.cycle/v1"]
    once = _fold(first)
    twice = _fold(first + again)
    assert twice.diagnostics == once.diagnostics
    assert twice.states["sc-b/gb"].members == once.states["sc-b/gb"].members
    assert twice.states["sc-b/gb"].recent_cycles == once.states["sc-b/gb"].recent_cycles
    # gb-1's last Event (item 2792, a failure) repeats: series.count 2 -> 3 is a new attempt
    router = GangRouter()
    _route_real(router, "ADDED")
    repeat = next(e for e in real_items("Event")
                  if e["metadata"]["name"] == "gb-1.18ed043d71a6581d")
    repeat = {**repeat, "series": {"count": 3,
                                   "lastObservedTime": "2026-12-01T03:42:00.000000Z"}}
    more = [(a.key, a.record) for a in router.route("events", "MODIFIED", repeat, None,
                                                    parse_time("2026-12-01T03:42:00Z"))]
    thrice = _fold(first + again + more)
    assert len(thrice.states["sc-b/gb"].recent_cycles) == \
        len(once.states["sc-b/gb"].recent_cycles) + 1


# ---------------------------------------------------------------------------------------------
# The shell against the test API server
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def server() -> Iterator[ApiServerDouble]:
    with ApiServerDouble(bookmark_interval=0.1) as s:
        yield s


def run_watcher(server: ApiServerDouble, publisher: MemoryPublisher,
                config: WatchConfig = FAST, **kwargs: Any) -> Watcher:
    watcher = Watcher(api_client(server), publisher, SETTINGS, config, **kwargs).start()
    assert watcher.synced(timeout=10)
    return watcher


def published_kube(publisher: MemoryPublisher) -> list[tuple[str | None, str, str, str]]:
    return [(k, r["type"], r["resource"], r["object"]["metadata"]["name"])
            for k, r in publisher.on(SETTINGS.topics.gang_events)
            if r["schema"] == "gangstate.kube/v1"]


def test_lists_then_watches_with_selectors_and_chunked_lists(server: ApiServerDouble) -> None:
    for i in range(5):
        server.apply(pod(f"w-{i}"))
    server.apply(pod("web-0", gang=None))
    server.apply(pod("other-0", scheduler="volcano"))  # a scheduler not followed
    publisher = MemoryPublisher()
    watcher = run_watcher(server, publisher, WatchConfig(**{**FAST.__dict__, "page_size": 2}))
    try:
        server.apply(pod("w-5"))
        eventually(lambda: len(published_kube(publisher)) == 6)
        assert published_kube(publisher) == [
            ("team-a/train", "SYNC", "pods", f"w-{i}") for i in range(5)] + [
            ("team-a/train", "ADDED", "pods", "w-5")]
        pod_lists = [q for m, path, q in server.requests if path == "/api/v1/pods"
                     and "watch" not in q
                     and q["fieldSelector"] == "spec.schedulerName=koord-scheduler"]
        assert [q.get("continue", "") != "" for q in pod_lists] == [False, True, True]  # 6 pods, pages of 2
        assert {q["fieldSelector"] for _, path, q in server.requests
                if path == "/api/v1/pods"} == {"spec.schedulerName=koord-scheduler",
                                               "spec.schedulerName=default-scheduler"}
        assert {q["fieldSelector"] for _, path, q in server.requests
                if path == "/api/v1/events"} == {
            "involvedObject.kind=Pod,reason=FailedScheduling",
            "involvedObject.kind=Pod,reason=Scheduled",
            "involvedObject.kind=Pod,reason=Preempted"}
        watches = [q for _, path, q in server.requests if q.get("watch")]
        assert all(q["allowWatchBookmarks"] == "true" and q["timeoutSeconds"] == "30"
                   for q in watches)
        first = json.loads(json.dumps(publisher.on(SETTINGS.topics.gang_events)[0][1]))
        assert first["object"]["kind"] == "Pod" and first["object"]["apiVersion"] == "v1"
        assert watcher.metrics.value("gangstate_watch_records_dropped_total",
                                     reason="no-gang") == 1
    finally:
        watcher.stop()


def test_dropped_connections_and_expired_resource_versions_miss_nothing(
        server: ApiServerDouble) -> None:
    """Disconnect, ERROR 410 mid-stream and 410 on resume: the folded stream still equals
    the test API server's final members per gang."""
    kept = [server.apply(pod(f"a-{i}", gang="alpha")) for i in range(3)]
    doomed = server.apply(pod("b-0", gang="beta"))
    publisher = MemoryPublisher()
    watcher = run_watcher(server, publisher)
    try:
        def relists() -> float:
            return watcher.metrics.value("gangstate_watch_relists_total", resource="pods")

        # 1. a dropped connection resumes from the last resourceVersion: no relist
        eventually(lambda: server.open_watches("pods") == 2)  # koord-, default-scheduler
        assert server.drop_watches() >= 1
        server.apply(pod("b-1", gang="beta"))
        eventually(lambda: ("team-a/beta", "ADDED", "pods", "b-1") in published_kube(publisher))
        assert relists() == 0

        # 2. changes the watch never delivers, then an ERROR 410 event: relist
        eventually(lambda: server.open_watches("pods") == 2)  # koord-, default-scheduler
        server.pause_watches()
        server.delete("pods", "team-a", "b-0")
        server.apply(pod("a-3", gang="alpha"))
        moved = dict(kept[0], spec={**kept[0]["spec"], "nodeName": "node-1"})
        server.apply(moved)
        server.compact(expire_watches=True)
        eventually(lambda: relists() == 2)  # each of the two pod streams relists
        server.resume_watches()
        eventually(lambda: ("team-a/beta", "DELETED", "pods", "b-0")
                   in published_kube(publisher))

        # 3. disconnected while things change and history is compacted: 410 on resume
        server.refuse_watches(True)
        server.drop_watches()
        server.delete("pods", "team-a", "a-1")
        server.apply(pod("g-0", gang="gamma"))
        server.compact()
        server.refuse_watches(False)
        eventually(lambda: relists() == 4)
        server.apply(pod("g-1", gang="gamma"))
        eventually(lambda: ("team-a/gamma", "ADDED", "pods", "g-1")
                   in published_kube(publisher))
    finally:
        watcher.stop()
    kube = published_kube(publisher)
    assert ("team-a/alpha", "DELETED", "pods", "a-1") in kube
    assert ("team-a/beta", "DELETED", "pods", "b-0") in kube
    assert doomed["metadata"]["uid"] not in members_by_gang_folded(publisher)["team-a/beta"]
    assert members_by_gang_folded(publisher) == members_by_gang_in_server(server)
    folded = fold_lines(publisher.lines(), None)
    assert folded.states["team-a/alpha"].bound == 1
    assert watcher.metrics.value("gangstate_watch_restarts_total", resource="pods",
                                 cause="gone") == 4  # 2 pod streams x 2


def test_bookmarks_let_a_watch_resume_past_compaction(server: ApiServerDouble) -> None:
    server.apply(pod("w-0"))
    publisher = MemoryPublisher()
    watcher = run_watcher(server, publisher)
    try:
        eventually(lambda: server.open_watches("pods") == 2)  # koord-, default-scheduler
        streams = [s for s in watcher.streams if s.spec.resource == "pods"]
        assert len(streams) == 2
        # changes the pod watches do not select advance the resourceVersion ...
        for i in range(3):
            server.apply(pod(f"x-{i}", scheduler="volcano"))
        target = str(server.resource_version)
        # ... and reach both pod watches through bookmarks only (a watch still
        # behind when the server compacts must relist, which is right, so the
        # test waits for both, not for the first)
        eventually(lambda: all(s.resource_version == target for s in streams))
        server.refuse_watches(True)
        server.drop_watches()
        server.compact()
        server.refuse_watches(False)
        server.apply(pod("w-1"))
        eventually(lambda: ("team-a/train", "ADDED", "pods", "w-1")
                   in published_kube(publisher))
        assert watcher.metrics.value("gangstate_watch_relists_total", resource="pods") == 0
    finally:
        watcher.stop()


def test_missing_podgroup_crd_is_reported_once() -> None:
    with ApiServerDouble(crds=False) as server:
        server.apply(pod("w-0"))
        publisher = MemoryPublisher()
        watcher = run_watcher(server, publisher)
        try:
            eventually(lambda: len(published_kube(publisher)) == 1)
            assert watcher.metrics.value("gangstate_watch_podgroup_crd_missing") == 1
            assert watcher.metrics.value("gangstate_watch_api_missing", resource="podgroups",
                                         api="scheduling.sigs.k8s.io/v1alpha1") == 1
            pg_requests = [r for r in server.requests
                           if r[1].startswith("/apis/scheduling.sigs.k8s.io/")]
            assert len(pg_requests) == 1
        finally:
            watcher.stop()


def test_podgroups_are_keyed_by_their_own_name(server: ApiServerDouble) -> None:
    publisher = MemoryPublisher()
    watcher = run_watcher(server, publisher)
    try:
        server.apply({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                      "metadata": {"name": "resnet", "namespace": "vision"},
                      "spec": {"minMember": 2}})
        eventually(lambda: published_kube(publisher) == [
            ("vision/resnet", "ADDED", "podgroups", "resnet")])
    finally:
        watcher.stop()


def test_scheduler_events_become_cycle_records_or_are_dropped(
        server: ApiServerDouble) -> None:
    member = server.apply(pod("w-0"))
    # a stored Event of a pod deleted before the watcher started (the list returns it)
    deleted = server.apply(pod("w-9"))
    server.apply(event("w-9.fs", deleted, "FailedScheduling", "0/1 nodes are available"))
    server.delete("pods", "team-a", "w-9")
    publisher = MemoryPublisher()
    watcher = run_watcher(server, publisher)
    try:
        server.apply(event("w-0.fs", member, "FailedScheduling",
                           "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."))
        server.apply(event("w-0.ok", member, "Scheduled",
                           "Successfully assigned team-a/w-0 to gpu-7",
                           when="2026-11-02T09:00:20Z"))
        ghost = pod("ghost")
        ghost["metadata"]["uid"] = "no-such-uid"
        server.apply(event("ghost.fs", ghost, "FailedScheduling", "0/1 nodes are available"))
        server.apply(event("w-0.other", member, "FailedScheduling", "x",
                           component="volcano"))

        def cycles() -> list[tuple[str | None, str, str, str, str | None]]:
            return [(k, r["stage"], r["status"], r["reason"], r["node"])
                    for k, r in publisher.on(SETTINGS.topics.gang_events)
                    if r["schema"] == "gangstate.cycle/v1"]

        eventually(lambda: len(cycles()) == 2)
        assert sorted(cycles()) == [
            ("team-a/train", "Bind", "Bound", "", "gpu-7"),
            ("team-a/train", "Filter", "Unschedulable", "Insufficient nvidia.com/gpu", None)]
        # the Events of the pod deleted before the start and of the pod never seen: held
        # hold_events (0.3 s) for their pod, then dropped and counted, never dead-lettered
        eventually(lambda: watcher.metrics.value("gangstate_watch_records_dropped_total",
                                                 reason="pod-gone") == 2)
        no_gang_event = event("x.fs", member, "FailedScheduling", "x")
        no_gang_event["involvedObject"] = {"kind": "Pod", "namespace": "team-a", "name": ""}
        server.apply(no_gang_event)
        letters = eventually(lambda: publisher.on(SETTINGS.topics.dead_letters))
        assert len(letters) == 1  # only the malformed Event
        key, letter = letters[0]
        assert letter["schema"] == "gangstate.dead-letter/v1"
        assert letter["topic"] == SETTINGS.topics.gang_events
        assert "involvedObject" in letter["error"]
        assert json.loads(letter["value"])["object"]["metadata"]["name"] == "x.fs"
        assert watcher.metrics.value("gangstate_watch_dead_letters_total",
                                     reason="malformed") == 1
        assert watcher.metrics.value("gangstate_watch_records_dropped_total",
                                     reason="other-scheduler") == 1
    finally:
        watcher.stop()


def test_a_dead_letter_is_stamped_by_the_injected_clock(server: ApiServerDouble) -> None:
    """The publish loop reads event time only from the watcher's ``clock``: a dead letter's
    ``observed_at`` is the clock's reading when its Event was routed, not the wall clock."""
    at = parse_time("2030-01-02T03:04:05.000006Z")
    publisher = MemoryPublisher()
    member = server.apply(pod("w-0"))
    watcher = run_watcher(server, publisher, clock=lambda: at)
    try:
        bad = event("x.fs", member, "FailedScheduling", "x")
        bad["involvedObject"] = {"kind": "Pod", "namespace": "team-a", "name": ""}
        server.apply(bad)
        [(_, letter)] = eventually(lambda: publisher.on(SETTINGS.topics.dead_letters))
        assert letter["observed_at"] == "2030-01-02T03:04:05.000006Z"
    finally:
        watcher.stop()


def test_kafka_down_is_retried_not_dropped(server: ApiServerDouble) -> None:
    publisher = MemoryPublisher()
    publisher.fail_next = 3
    watcher = run_watcher(server, publisher)
    try:
        for i in range(3):
            server.apply(pod(f"w-{i}"))
        eventually(lambda: len(published_kube(publisher)) == 3)
        assert [n for _, _, _, n in published_kube(publisher)] == ["w-0", "w-1", "w-2"]
        assert watcher.metrics.value("gangstate_watch_publish_retries_total") == 3
        assert watcher.metrics.value("gangstate_watch_records_published_total",
                                     schema="gangstate.kube/v1", resource="pods") == 3
    finally:
        watcher.stop()


# ---------------------------------------------------------------------------------------------
# The handed traces, served by the test API server
# ---------------------------------------------------------------------------------------------

def _outputs(result: Any) -> list[tuple[str, str, str]]:
    return [(d["gang"], d["reason"], json.dumps(d["facts"], sort_keys=True))
            for d in result.diagnostics]


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir()
                                         if (p / "trace.jsonl").is_file()))
def test_trace_through_the_test_apiserver_folds_like_the_trace(case: str) -> None:
    lines = (CASES / case / "trace.jsonl").read_bytes().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    now = {"at": parse_time(records[0]["observed_at"])}
    publisher = MemoryPublisher()
    with ApiServerDouble() as server:
        watcher = run_watcher(server, publisher, clock=lambda: now["at"])
        try:
            for record in records:
                now["at"] = parse_time(record["observed_at"])
                if record["schema"] != "gangstate.kube/v1":
                    # the scheduler shim publishes cycle records itself
                    publisher.send_json(SETTINGS.topics.gang_events, record.get("gang"), record)
                    continue
                obj = record["object"]
                meta = obj["metadata"]
                count = len(published_kube(publisher))
                if record["type"] == "DELETED":
                    server.delete(obj["kind"], meta["namespace"], meta["name"], meta["uid"])
                else:
                    server.apply(obj)
                eventually(lambda: len(published_kube(publisher)) == count + 1)
        finally:
            watcher.stop()
    at = max(parse_time(r["observed_at"]) for r in records) + 3600 * 10**6
    direct = fold_lines(enumerate(lines, start=1), at)
    served = fold_lines(publisher.lines(), at)
    assert not served.errors
    assert _outputs(served) == _outputs(direct)
    for gang, state in direct.states.items():
        assert set(served.states[gang].members) == set(state.members), gang
        assert served.states[gang].phase == state.phase


# ---------------------------------------------------------------------------------------------
# Quiet watches: the server ends them before the client's read timeout
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("watch_timeout,read_timeout,error", [
    (300, 90.0, "--read-timeout 90) must exceed the watch timeout (--watch-timeout 300)"),
    (90, 90.0, "must exceed the watch timeout (--watch-timeout 90) by at least 5 s"),
    (60, 64.9, "--read-timeout 64.9"),
    (0, 90.0, "--watch-timeout) must be at least 1 s, not 0"),
    (60, 65.0, None),
], ids=["old defaults", "equal", "under the margin", "server default timeout", "at the margin"])
def test_watch_config_rejects_timeouts_that_cut_quiet_watches(
        watch_timeout: int, read_timeout: float, error: str | None) -> None:
    if error is None:
        assert WatchConfig(watch_timeout=watch_timeout, read_timeout=read_timeout)
        return
    with pytest.raises(ValueError) as err:
        WatchConfig(watch_timeout=watch_timeout, read_timeout=read_timeout)
    assert error in str(err.value)


def test_default_timeouts_let_the_server_end_a_quiet_watch_first() -> None:
    config = WatchConfig()
    assert (config.watch_timeout, config.read_timeout) == (60, 90.0)


def _watch_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    return subprocess.run([sys.executable, "-m", "streams.cli", "watch", *args],
                          capture_output=True, text=True, timeout=60, env=env)


def test_watch_command_refuses_a_watch_timeout_above_the_read_timeout() -> None:
    run = _watch_cli("--watch-timeout", "300")
    assert run.returncode == 2
    assert ("gangstate watch: the read timeout (--read-timeout 90) must exceed the watch "
            "timeout (--watch-timeout 300) by at least 5 s") in run.stderr
    # the defaults pass: the next complaint is the missing Kafka
    run = _watch_cli()
    assert run.returncode == 2 and "KAFKA_BOOTSTRAP_SERVERS" in run.stderr
    assert "timeout" not in run.stderr


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "producers.watch.watching" and r.levelno >= logging.WARNING]


def test_a_quiet_watch_is_ended_by_the_server_and_resumed_without_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="producers.watch.watching")
    config = WatchConfig(**{**FAST.__dict__, "watch_timeout": 1, "read_timeout": 6.0})
    with ApiServerDouble(bookmark_interval=3600) as quiet:  # no bookmarks: nothing is sent
        quiet.apply(pod("w-0"))
        publisher = MemoryPublisher()
        watcher = run_watcher(quiet, publisher, config)
        try:
            eventually(lambda: watcher.metrics.value("gangstate_watch_restarts_total",
                                                     resource="pods", cause="closed") >= 2)
            quiet.apply(pod("w-1"))
            eventually(lambda: ("team-a/train", "ADDED", "pods", "w-1")
                       in published_kube(publisher))
        finally:
            watcher.stop()
        assert {q["timeoutSeconds"] for _, _, q in quiet.requests if q.get("watch")} == {"1"}
    assert watcher.metrics.value("gangstate_watch_restarts_total", resource="pods",
                                 cause="read-timeout") == 0
    assert _warnings(caplog) == []


def test_a_watch_silent_past_the_read_timeout_resumes_at_debug_level(
        server: ApiServerDouble, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that does not end the watch at timeoutSeconds (or a connection dropped on the
    way without a reset): the read times out, the watch resumes from its resourceVersion, and
    that is logged at DEBUG, not as a warning."""
    import producers.watch.plan

    monkeypatch.setattr(producers.watch.plan, "WATCH_TIMEOUT_MARGIN", 0.5)  # a quick read timeout
    caplog.set_level(logging.DEBUG, logger="producers.watch.watching")
    config = WatchConfig(**{**FAST.__dict__, "watch_timeout": 1, "read_timeout": 1.5})
    publisher = MemoryPublisher()
    watcher = run_watcher(server, publisher, config)
    try:
        eventually(lambda: server.open_watches("pods") == 2)  # koord-, default-scheduler
        server.stall_watches(True)
        eventually(lambda: watcher.metrics.value("gangstate_watch_restarts_total",
                                                 resource="pods", cause="read-timeout") >= 1)
        server.stall_watches(False)
        server.apply(pod("w-0"))
        eventually(lambda: ("team-a/train", "ADDED", "pods", "w-0")
                   in published_kube(publisher))
    finally:
        watcher.stop()
    assert watcher.metrics.value("gangstate_watch_relists_total", resource="pods") == 0
    assert watcher.metrics.value("gangstate_watch_restarts_total", resource="pods",
                                 cause="connection") == 0
    assert _warnings(caplog) == []
    assert any(r.levelno == logging.DEBUG and "nothing received for 1.5 s" in r.getMessage()
               and "Read timed out" in r.getMessage() for r in caplog.records)


def test_capacity_streams_fill_the_node_cache_with_slim_objects(server: ApiServerDouble) -> None:
    """The Node and bound-pod streams (cluster-wide, ``spec.nodeName!=``) feed the router's
    per-node cache and publish nothing; what the stream keeps is slimmed to what the cache
    reads."""
    server.apply({"apiVersion": "v1", "kind": "Node",
                  "metadata": {"name": "gpu-1", "labels": {"big": "label"}},
                  "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]},
                  "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "4"},
                             "images": [{"names": ["a-large-list"]}]}})
    server.apply(kube_pod("other", "web", uid=None, rv=None, annotations={"x": "y"},
                          scheduler="default-scheduler", node="gpu-1", phase="Running",
                          containers=[{"name": "c", "image": "nginx",
                                       "env": [{"name": "SECRET", "value": "s"}],
                                       "resources": {"requests": {"nvidia.com/gpu": "3"}}}]))
    server.apply(kube_pod("pending", "web", uid=None, rv=None, scheduler="default-scheduler",
                          gpu="1", phase=None))
    publisher = MemoryPublisher()
    watcher = run_watcher(server, publisher,
                          WatchConfig(**{**FAST.__dict__, "capacity": True}))
    try:
        x = (Toleration("x", "Exists", "", "NoSchedule"),)  # the node's taint, tolerated
        eventually(lambda: watcher.router.nodes.capacity(
            "nvidia.com/gpu", 1000, tolerations=x) == {
            "resource": "nvidia.com/gpu", "request": 1000, "allocatable": 4000, "free": 1000,
            "nodes": 1, "room": 1, "largest": 4000})
        # a member without that toleration has no node (rule CAP1)
        assert watcher.router.nodes.capacity("nvidia.com/gpu", 1000)["nodes"] == 0
        (bound,) = [s for s in watcher.streams if s.spec.resource == "boundpods"]
        (kept,) = bound.known.values()
        assert kept["spec"] == {"nodeName": "gpu-1", "containers": [
            {"resources": {"requests": {"nvidia.com/gpu": "3"}}}], "initContainers": []}
        (nodes,) = [s for s in watcher.streams if s.spec.resource == "nodes"]
        (node,) = nodes.known.values()
        assert node["status"] == {"allocatable": {"cpu": "8", "nvidia.com/gpu": "4"}}
        assert "labels" not in node["metadata"]
    finally:
        watcher.stop()
    assert published_kube(publisher) == []  # neither stream publishes (no gang pods here)
