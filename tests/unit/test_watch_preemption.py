"""The watch producer and preemption: the preemption clause of FailedScheduling messages (the
real koord-scheduler v1.8.0 texts), Preempted Events routed to the preemptor's gang, the
victim's deletion, an unknown preemptor (docs/contracts.md, "Preemption")."""

from __future__ import annotations

from producers.watch.scheduler_events import preempted_by, preemption_of
from producers.watch.watching import Drop, GangRouter, Publish
from tests.fixtures.builders import kube_pod

REAL_TERMINATING = ("0/2 nodes are available: 2 Insufficient nvidia.com/gpu. no new claims to "
                    "deallocate, preemption: not eligible due to a terminating pod on the "
                    "nominated node.")
REAL_NO_VICTIMS = ("0/2 nodes are available: 2 Insufficient nvidia.com/gpu. no new claims to "
                   "deallocate, preemption: 0/2 nodes are available: 2 No preemption victims "
                   "found for incoming pod.")


def test_preemption_clause_of_the_real_messages():
    assert preemption_of(REAL_TERMINATING) == (
        "victims-terminating", "not eligible due to a terminating pod on the nominated node.")
    assert preemption_of(REAL_NO_VICTIMS) == (
        "no-victims", "0/2 nodes are available: 2 No preemption victims found for incoming pod.")
    assert preemption_of("0/2 nodes are available: 2 Insufficient cpu.") is None
    assert preemption_of("0/3 nodes are available: 1 Insufficient cpu. preemption: 0/3 nodes are "
                         "available: 1 No preemption victims found for incoming pod, 2 "
                         "Preemption is not helpful for scheduling.")[0] == "not-helpful"
    assert preemption_of("0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible "
                         "due to preemptionPolicy=Never.")[0] == "not-eligible"
    assert preempted_by("Preempted by pod 1f2e-uid on node node-a") == ("1f2e-uid", "node-a")


def test_preemption_clause_inside_a_members_quoted_fit_error():
    """A member released at Permit with the culprit's fit error (F3) carries the culprit's
    clause inside the quotes; a PreFilter refusal (B2) its own clause after them."""
    inner = REAL_NO_VICTIMS.replace('"', '\\"')
    f3 = (f'0/1 nodes are available: 1 GangGroup "ns/g" gets rejected due to member Pod "ns/g-0" '
          f'is unschedulable with reason "{inner}", alreadyWaitForBound: 1.')
    assert preemption_of(f3) == (
        "no-victims", "0/2 nodes are available: 2 No preemption victims found for incoming pod.")
    b2 = (f'0/2 nodes are available: GangGroup "ns/g" gets rejected due to member Pod "ns/g-0" '
          f'is unschedulable with reason "{REAL_NO_VICTIMS}", alreadyWaitForBound: 0. '
          f'preemption: not eligible due to a terminating pod on the nominated node.')
    assert preemption_of(b2)[0] == "victims-terminating"


def gang_pod(name: str, uid: str) -> dict:
    return kube_pod(name, uid=uid, labels={"pod-group.scheduling.sigs.k8s.io": "g"},
                    api_version=False)


def victim_pod(name: str, uid: str, grace: int = 30) -> dict:
    return kube_pod(name, "low", uid=uid, rv="5", scheduler=None, node="node-a", grace=grace,
                    containers=[], phase="Running", api_version=False)


def preempted_event(victim: str, victim_uid: str, preemptor_uid: str, *,
                    related: dict | None = None) -> dict:
    return {"metadata": {"name": f"{victim}.1", "namespace": "low", "uid": f"ev-{victim}"},
            "reason": "Preempted", "type": "Normal", "reportingComponent": "koord-scheduler",
            "involvedObject": {"kind": "Pod", "namespace": "low", "name": victim,
                               "uid": victim_uid},
            **({"related": related} if related else {}),
            "message": f"Preempted by pod {preemptor_uid} on node node-a"}


def test_preempted_event_goes_to_the_preemptors_gang_and_the_victims_deletion_follows():
    r = GangRouter()
    r.route("boundpods", "ADDED", victim_pod("v-0", "uid-v0"), None, 1)
    r.route("pods", "ADDED", gang_pod("g-0", "uid-g0"), None, 2)
    [action] = r.route("events", "ADDED", preempted_event("v-0", "uid-v0", "uid-g0"), None, 3)
    assert isinstance(action, Publish) and action.key == "ns/g"
    rec = action.record
    assert (rec["schema"], rec["type"], rec["victim"], rec["node"], rec["preemptor"],
            rec["grace_period_seconds"], rec["victim_bound"]) == (
        "gangstate.preemption/v1", "Preempted",
        {"namespace": "low", "name": "v-0", "uid": "uid-v0"}, "node-a",
        {"namespace": "ns", "name": "g-0", "uid": "uid-g0"}, 30, True)
    [gone] = r.route("boundpods", "DELETED", victim_pod("v-0", "uid-v0"), None, 4)
    assert isinstance(gone, Publish) and gone.key == "ns/g"
    assert gone.record["type"] == "Deleted" and gone.record["victim"]["uid"] == "uid-v0"
    assert r.route("boundpods", "DELETED", victim_pod("v-0", "uid-v0"), None, 5) == []


def test_preempted_event_of_an_unknown_preemptor_is_held_then_dropped():
    r = GangRouter(hold_events=10.0)
    assert r.route("events", "ADDED", preempted_event("v-0", "uid-v0", "uid-x"), None, 0) == []
    assert [a.reason for a in r.expire(11_000_000) if isinstance(a, Drop)] == [
        "preemptor-unknown"]


def test_preempted_event_held_until_its_preemptor_shows_up():
    r = GangRouter(hold_events=10.0)
    ev = preempted_event("v-0", "uid-v0", "uid-g0",
                         related={"kind": "Pod", "namespace": "ns", "name": "g-0"})
    assert r.route("events", "ADDED", ev, None, 0) == []
    actions = r.route("pods", "ADDED", gang_pod("g-0", "uid-g0"), None, 1)
    assert [a.record["schema"] for a in actions if isinstance(a, Publish)] == [
        "gangstate.kube/v1", "gangstate.preemption/v1"]


def test_nominated_node_is_published_and_decoded():
    from producers.watch.watching import kube_record
    from streams.wire.decoding import decode_input
    import json
    pod = gang_pod("g-0", "uid-g0")
    pod["status"]["nominatedNodeName"] = "node-a"
    rec = kube_record("pods", "MODIFIED", pod, 1_796_000_000_000_000)
    assert rec["object"]["status"] == {"phase": "Pending", "nominatedNodeName": "node-a"}
    assert decode_input(json.dumps(rec)).record.nominated_node == "node-a"


# -- the whole chain: watch events -> GangRouter -> gang-events lines -> gangstate fold ----------

T = 1_796_119_200_000_000  # 2026-12-01T10:00:00Z, microseconds


def _t(seconds: float) -> int:
    return T + int(seconds * 1_000_000)


def member_pod(name: str, rv: int, *, nominated: str | None = None,
               node: str | None = None, min_available: str = "2") -> dict:
    return kube_pod(name, rv=str(rv), gang="g", min_available=min_available, node=node,
                    gpu="1", phase="Running" if node else "Pending", nominated=nominated)


def failed_event(name: str, count: int, message: str) -> dict:
    return {"metadata": {"name": f"{name}.fs", "namespace": "ns", "uid": f"ev-fs-{name}"},
            "reason": "FailedScheduling", "type": "Warning",
            "reportingComponent": "koord-scheduler", "series": {"count": count},
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": name,
                               "uid": f"uid-{name}"}, "message": message}


def chain(steps: list[tuple[float, str, str, dict]]) -> list[dict]:
    """Route each ``(seconds, resource, type, object)`` through one ``GangRouter`` and fold what
    it publishes as a trace; returns the diagnostics."""
    import json

    from streams.wire.traces import fold_lines
    router = GangRouter()
    lines = []
    for seconds, resource, type_, obj in steps:
        for action in router.route(resource, type_, obj, None, _t(seconds)):
            if isinstance(action, Publish):
                lines.append(json.dumps(action.record).encode())
    result = fold_lines(list(enumerate(lines, 1)), _t(steps[-1][0]))
    assert result.errors == []
    return result.diagnostics


def nodes() -> list[tuple[float, str, str, dict]]:
    return [(0, "nodes", "ADDED", {"metadata": {"name": n, "uid": f"uid-{n}"},
                                   "status": {"allocatable": {"nvidia.com/gpu": "1"}}})
            for n in ("node-a", "node-b")]


def test_chain_preemption_in_progress_then_bound():
    steps = nodes() + [
        (0, "boundpods", "ADDED", victim_pod("v-0", "uid-v0")),
        (0, "boundpods", "ADDED", {**victim_pod("v-1", "uid-v1"),
                                   "spec": {"nodeName": "node-b", "containers": [],
                                            "terminationGracePeriodSeconds": 30}}),
        (0, "pods", "ADDED", member_pod("g-0", 1)), (0, "pods", "ADDED", member_pod("g-1", 1)),
        (0.5, "events", "ADDED", failed_event("g-0", 1, REAL_TERMINATING.split(" no new")[0])),
        (1.0, "events", "ADDED", preempted_event("v-0", "uid-v0", "uid-g-0")),
        (1.1, "events", "ADDED", {**preempted_event("v-1", "uid-v1", "uid-g-1"),
                                  "message": "Preempted by pod uid-g-1 on node node-b"}),
        (1.2, "pods", "MODIFIED", member_pod("g-0", 2, nominated="node-a")),
        (1.3, "pods", "MODIFIED", member_pod("g-1", 2, nominated="node-b")),
    ]
    steps += [(1.5 + i, "events", "MODIFIED",
               failed_event("g-0" if i % 2 else "g-1", i, REAL_TERMINATING))
              for i in range(2, 30)]
    steps += [(31.0, "boundpods", "DELETED", victim_pod("v-0", "uid-v0")),
              (31.2, "boundpods", "DELETED", victim_pod("v-1", "uid-v1")),
              (31.5, "pods", "MODIFIED", member_pod("g-0", 3, node="node-a")),
              (31.5, "pods", "MODIFIED", member_pod("g-1", 3, node="node-b"))]
    out = chain(steps)
    assert [(d["reason"], d["observed_at"]) for d in out] == [
        ("GangPreempting", "2026-12-01T10:00:02.100000Z"),
        ("GangScheduled", "2026-12-01T10:00:31.500000Z")]
    assert out[0]["facts"]["victims"] == [
        {"pod": "low/v-0", "uid": "uid-v0", "node": "node-a", "for": "g-0",
         "preempted_at": "2026-12-01T10:00:01.000000Z", "grace_seconds": 30},
        {"pod": "low/v-1", "uid": "uid-v1", "node": "node-b", "for": "g-1",
         "preempted_at": "2026-12-01T10:00:01.100000Z", "grace_seconds": 30}]
    assert out[0]["facts"]["nominated"] == {"g-0": "node-a", "g-1": "node-b"}


def test_chain_wasted_preemption_of_two_victims_for_a_gang_of_three():
    steps = nodes() + [
        (0, "boundpods", "ADDED", victim_pod("v-0", "uid-v0", grace=0)),
        (0, "boundpods", "ADDED", {**victim_pod("v-1", "uid-v1", grace=0),
                                   "spec": {"nodeName": "node-b", "containers": [],
                                            "terminationGracePeriodSeconds": 0}}),
        *[(0, "pods", "ADDED", member_pod(f"g-{i}", 1, min_available="3")) for i in range(3)],
        (0.5, "events", "ADDED", failed_event("g-0", 1, REAL_TERMINATING.split(" no new")[0])),
        (1.0, "events", "ADDED", preempted_event("v-0", "uid-v0", "uid-g-0")),
        (1.1, "boundpods", "DELETED", victim_pod("v-0", "uid-v0")),
        (1.2, "events", "ADDED", {**preempted_event("v-1", "uid-v1", "uid-g-1"),
                                  "message": "Preempted by pod uid-g-1 on node node-b"}),
        (1.3, "boundpods", "DELETED", victim_pod("v-1", "uid-v1")),
    ]
    steps += [(2.0 + i, "events", "MODIFIED", failed_event(f"g-{i % 3}", 2 + i, REAL_NO_VICTIMS))
              for i in range(15)]
    out = chain(steps)
    assert [d["reason"] for d in out] == ["GangPreemptionWasted", "GangUnschedulable"]
    wasted = out[0]
    assert [(i["namespace"], i["name"]) for i in wasted["involved"]] == [
        ("ns", "g-0"), ("ns", "g-1"), ("ns", "g-2"), ("low", "v-0"), ("low", "v-1")]
    assert wasted["message"] == (
        "gang ns/g still cannot be scheduled although koord-scheduler preempted low/v-0 on "
        "node-a (for g-0, at 2026-12-01T10:00:01.000000Z) and low/v-1 on node-b (for g-1, at "
        "2026-12-01T10:00:01.200000Z) for it: it needs 3 x 1 nvidia.com/gpu and the cluster "
        "has 2 allocatable on 2 nodes; the evictions freed room the gang cannot use "
        "(koord-scheduler preempts for one pod at a time, not for the whole gang)")


def test_preempted_record_carries_the_events_own_time():
    """koord-scheduler throttles its Event writes (38-66 s late, measured): the record keeps
    the Event's eventTime, which the fold tells as the preemption's time."""
    r = GangRouter()
    r.route("boundpods", "ADDED", victim_pod("v-0", "uid-v0"), None, 1)
    r.route("pods", "ADDED", gang_pod("g-0", "uid-g0"), None, 2)
    ev = {**preempted_event("v-0", "uid-v0", "uid-g0"),
          "eventTime": "2026-12-01T10:00:01.234567Z"}
    [action] = r.route("events", "ADDED", ev, None, 3)
    assert isinstance(action, Publish)
    assert action.record["event_time"] == "2026-12-01T10:00:01.234567Z"
    ev = {**ev, "eventTime": None, "lastTimestamp": "2026-12-01T10:00:02Z"}
    r2 = GangRouter()
    r2.route("pods", "ADDED", gang_pod("g-0", "uid-g0"), None, 2)
    [action] = r2.route("events", "ADDED", ev, None, 3)
    assert action.record["event_time"] == "2026-12-01T10:00:02.000000Z"
    assert action.record["victim_bound"] is False  # not known bound: gone at once in the fold
