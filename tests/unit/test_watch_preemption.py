"""The watch producer and preemption: the preemption clause of FailedScheduling messages (the
real koord-scheduler v1.8.0 texts), Preempted Events routed to the preemptor's gang, the
victim's deletion, an unknown preemptor (docs/contracts.md, "Preemption")."""

from __future__ import annotations

from producers.watch.scheduler_events import preempted_by, preemption_of
from producers.watch.watching import Drop, GangRouter, Publish

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


def gang_pod(name: str, uid: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": "1",
                         "labels": {"pod-group.scheduling.sigs.k8s.io": "g"}},
            "spec": {"schedulerName": "koord-scheduler"}, "status": {"phase": "Pending"}}


def victim_pod(name: str, uid: str, grace: int = 30) -> dict:
    return {"metadata": {"name": name, "namespace": "low", "uid": uid, "resourceVersion": "5"},
            "spec": {"nodeName": "node-a", "terminationGracePeriodSeconds": grace,
                     "containers": []}, "status": {"phase": "Running"}}


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
