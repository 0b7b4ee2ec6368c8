"""Table of named scenarios for ``producers.watch.scheduler_events``: scheduler Event text -> outcome.

One message per row of the catalogue (``CATALOGUE``), built from the format string the source
writes (file:line in the catalogue), framed as kube-scheduler v1.35.2 frames it (v1.37.2 for the
rows of Kubernetes' own gang scheduling, ``GS*``); then every Event
of the real recording (the project brief's ``data/koord-v1.8.0/gpu-short.json.gz``) and its committed
excerpt (``tests/data/``). Expected values are worked out by hand.
"""

from __future__ import annotations

import collections
import gzip
import json
from pathlib import Path

import pytest

from producers.watch.scheduler_events import (CATALOGUE, Outcome, dominant_fit_reason,
                                              fit_clause, parse_scheduler_event)

NS, POD = "team-b", "moe-w-0"
ME = f"{NS}/{POD}"
GPU = "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."
RELEASED = "0/1 nodes are available: 1 "
PREEMPTION = " preemption: 0/8 nodes are available: 8 Preemption is not helpful for scheduling."
RECORDING = Path(__file__).resolve().parents[3] / "shared" / "data" / "koord-v1.8.0" / \
    "gpu-short.json.gz"
"""The project brief's recording of the real scheduler, beside the checkout when present."""
EXCERPT = Path(__file__).parents[1] / "data" / "koord-v1.8.0-gpu-short-excerpt.json"
FORMS_EXCERPT = Path(__file__).parents[1] / "data" / "koord-v1.8.0-gpu-short-forms.json"


def member(culprit: str, reason: str, waiting: int) -> str:
    """K core/core.go:414, as Go's %q writes it."""
    return (f'GangGroup "team-b/moe" gets rejected due to member Pod "{culprit}" is '
            f'unschedulable with reason {json.dumps(reason)}, alreadyWaitForBound: {waiting}')


HELD = ("gangstate holds gang group team-b/moe: gangstate holds gang team-b/moe out of the "
        "scheduling queue: it cannot fit (needs 3 x 1 nvidia.com/gpu (3 members to place); the "
        "cluster has 2 allocatable on 2 nodes, room for 2 members even once preemption evicted "
        "every pod it may); it is tried again when a node with at least 1 more nvidia.com/gpu "
        "joins, when its members, minMember or priority change, or after 1h00m; before the hold "
        "the scheduler ran 950 rounds a minute and wrote 2190 FailedScheduling Events a minute for it")
"""The scheduler shim's refusal of a held pod (docs/shim.md): ``gangstate holds gang group
<group>: <the HoldGang's message>`` (``streams.core.rules.holding.held_message``'s example)."""
TAINTS = "0/40 nodes are available: " + ", ".join(
    f"1 node(s) had untolerated taint {{t{i}: }}" for i in range(40)) + "."
CUT_HEAD = (RELEASED + 'GangGroup "team-b/moe" gets rejected due to member Pod "team-b/moe-w-2" '
            'is unschedulable with reason "')
CUT = (RELEASED + member("team-b/moe-w-2", TAINTS, 2) + ".")[:1020] + " ..."
"""kube-scheduler's cut (KS schedule_one.go:1121-1129): 1020 bytes and " ...": the rest of the
fit error, its closing quote and alreadyWaitForBound are lost."""

SCENARIOS = [
    ("E1 Scheduled", "Scheduled", "Successfully assigned team-b/moe-w-0 to gpu-node-7",
     Outcome("Bind", "Bound", "", node="gpu-node-7", form="E1")),
    ("E1 Scheduled with an odd message", "Scheduled", "assigned somewhere",
     Outcome("Bind", "Bound", "", parsed=False)),
    ("E2 skip schedule deleting pod: no attempt", "FailedScheduling",
     "skip schedule deleting pod: team-b/moe-w-0",
     Outcome("PreFilter", "UnschedulableAndUnresolvable", "PodDeleting", form="E2",
             attempt=False)),
    ("G1 gangstate's hold, refused by the shim at BeforePreFilter: no attempt",
     "FailedScheduling", f"0/8 nodes are available: {HELD}.{PREEMPTION}",
     Outcome("PreFilter", "UnschedulableAndUnresolvable", "GangHeld", form="G1",
             attempt=False)),
    ("G1 unframed, of a gang group of two gangs", "FailedScheduling",
     "gangstate holds gang group team-b/moe,team-b/moe-2: held",
     Outcome("PreFilter", "UnschedulableAndUnresolvable", "GangHeld", form="G1",
             attempt=False)),
    ("FIT plain fit error", "FailedScheduling", GPU,
     Outcome("Filter", "Unschedulable", "Insufficient nvidia.com/gpu", culprit=ME, form="FIT",
             fit_error=GPU)),
    ("FIT the reason with most nodes wins", "FailedScheduling",
     "0/5 nodes are available: 2 Insufficient cpu, 3 Insufficient memory.",
     Outcome("Filter", "Unschedulable", "Insufficient memory", culprit=ME, form="FIT",
             fit_error="0/5 nodes are available: 2 Insufficient cpu, 3 Insufficient memory.")),
    ("FIT tie: first written wins", "FailedScheduling",
     "0/4 nodes are available: 2 Insufficient cpu, 2 node(s) had untolerated taint "
     "{node-role.kubernetes.io/control-plane: }.",
     Outcome("Filter", "Unschedulable", "Insufficient cpu", culprit=ME, form="FIT",
             fit_error="0/4 nodes are available: 2 Insufficient cpu, 2 node(s) had untolerated "
                       "taint {node-role.kubernetes.io/control-plane: }.")),
    ("FIT with DefaultPreemption's no-victims tail", "FailedScheduling",
     GPU + " preemption: 0/8 nodes are available: 8 No preemption victims found for incoming pod.",
     Outcome("Filter", "Unschedulable", "Insufficient nvidia.com/gpu", culprit=ME, form="FIT",
             fit_error=GPU)),
    ("FIT with the v1.35 DRA clause before the preemption tail (real cluster)",
     "FailedScheduling",
     "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: 0/2 "
     "nodes are available: 2 Preemption is not helpful for scheduling.",
     Outcome("Filter", "Unschedulable", "Insufficient cpu", culprit=ME, form="FIT",
             fit_error="0/2 nodes are available: 2 Insufficient cpu.")),
    ("B2 PreFilter refusal naming the round's failed member", "FailedScheduling",
     f"0/8 nodes are available: {member('team-b/moe-w-2', GPU, 1)}.{PREEMPTION}",
     Outcome("PreFilter", "UnschedulableAndUnresolvable", "GangGroupRejected",
             culprit="team-b/moe-w-2", form="B2", fit_error=GPU, already_wait_for_bound=1)),
    ("F3 waiting member released by another member's failure", "FailedScheduling",
     f"{RELEASED}{member('team-b/moe-w-2', GPU, 2)}.",
     Outcome("PostFilter", "Rejected", "GangGroupRejected", culprit="team-b/moe-w-2", form="F3",
             fit_error=GPU, already_wait_for_bound=2)),
    ("F3 naming this pod: its own failure (older frame)", "FailedScheduling",
     member("team-b/moe-w-0", "0/3 nodes are available: 3 Insufficient cpu.", 0),
     Outcome("Filter", "Unschedulable", "Insufficient cpu", culprit=ME, form="F3",
             fit_error="0/3 nodes are available: 3 Insufficient cpu.",
             already_wait_for_bound=0)),
    ("F3 with a reason that is no fit error", "FailedScheduling",
     f"{RELEASED}{member('moe-w-2', 'no candidate topology nodes', 0)}.",
     Outcome("PostFilter", "Rejected", "GangGroupRejected", culprit="team-b/moe-w-2", form="F3",
             fit_error="no candidate topology nodes", already_wait_for_bound=0)),
    ("F4 F3 cut at 1024 bytes inside the fit error", "FailedScheduling", CUT,
     Outcome("PostFilter", "Rejected", "GangGroupRejected", culprit="team-b/moe-w-2", form="F3",
             fit_error=CUT[len(CUT_HEAD):], truncated=True)),
    ("F5 no gang scheduling context", "FailedScheduling",
     f'{RELEASED}gets rejected due to member pod "team-b/moe-w-3" is unschedulable.',
     Outcome("PostFilter", "Rejected", "GangGroupRejected", culprit="team-b/moe-w-3",
             form="F5")),
    ("U1 released in another member's Unreserve (bare pod name)", "FailedScheduling",
     f'{RELEASED}Gang "team-b/moe" gets rejected due to Pod "moe-w-1" in Unreserve.',
     Outcome("Unreserve", "Rejected", "GangGroupRejected", form="U1")),
    ("U1 its own Unreserve", "FailedScheduling",
     f'{RELEASED}Gang "team-b/moe" gets rejected due to Pod "moe-w-0" in Unreserve.',
     Outcome("Unreserve", "Unschedulable", "GangUnreserve", form="U1")),
    ("N1 the round handed out every pending member", "FailedScheduling",
     f"{RELEASED}all pending pods is already been attempted.",
     Outcome("Permit", "Rejected", "GangRoundEnded", form="N1")),
    ("N2 the gang was deleted", "FailedScheduling",
     f"{RELEASED}gang is nil, may be already deleted.",
     Outcome("Permit", "Rejected", "GangDeleted", form="N2")),
    ("T1 Permit without a gang", "FailedScheduling", f"{RELEASED}Gang not found.",
     Outcome("Permit", "Unschedulable", "GangNotFound", form="T1")),
    ("T4 Permit timeout", "FailedScheduling",
     f"{RELEASED}rejected due to timeout after waiting 10m0s at plugin Coscheduling.",
     Outcome("Permit", "Timeout", "PermitTimeout", form="T4")),
    ("F7a released as a preemption victim", "FailedScheduling", f"{RELEASED}preempted.",
     Outcome("Permit", "Rejected", "GangPreempted", form="F7a")),
    ("F7b released after the job's preemption succeeded", "FailedScheduling",
     f"{RELEASED}preempt success, alreadyWaitingForBound: 2/3.",
     Outcome("Permit", "Rejected", "GangPreemption", form="F7b")),
    ("F7b released after the job's preemption failed", "FailedScheduling",
     f"{RELEASED}preemption not helpful.",
     Outcome("Permit", "Rejected", "GangPreemption", form="F7b")),
    ("F6 Koordinator's own PostFilter status", "FailedScheduling",
     'Gang "team-b/moe" gets rejected due to pod is unschedulable',
     Outcome("PostFilter", "Unschedulable", "GangRejected", form="F6")),
    ("B1a PreFilter: gang not found", "FailedScheduling",
     "0/8 nodes are available: can't find gang, gangName: team-b/moe, podName: team-b/moe-w-0."
     + PREEMPTION,
     Outcome("PreFilter", "UnschedulableAndUnresolvable", "GangNotFound", form="B1a")),
    ("B1b PreFilter: gang not initialised", "FailedScheduling",
     "0/8 nodes are available: gang has not init, gangName: team-b/moe, podName: "
     "team-b/moe-w-0.",
     Outcome("PreFilter", "UnschedulableAndUnresolvable", "GangNotInitialized", form="B1b")),
    ("B1c PreFilter: basic check (real recording)", "FailedScheduling",
     "0/2 nodes are available: gangGroup [team-b/moe] basic check: memberGangs [team-b/moe] "
     "child pod not collect enough, current gang: team-b/moe, podName: team-b/moe-w-0." + PREEMPTION,
     Outcome("PreFilter", "UnschedulableAndUnresolvable", "GangBasicCheckUnsatisfied",
             form="B1c")),
    ("B3 PreFilter: no cluster network topology", "FailedScheduling",
     "0/8 nodes are available: no cluster network topology.",
     Outcome("PreFilter", "UnschedulableAndUnresolvable", "NoClusterNetworkTopology",
             form="B3")),
    ("P7 PreEnqueue: not yet attempted (log only in v1.8.0)", "FailedScheduling",
     "gangGroup team-b/moe is scheduling and this pod has not been attempted",
     Outcome("PreEnqueue", "UnschedulableAndUnresolvable", "GangGroupScheduling", form="P7")),
    ("P8 PreEnqueue: representative exists (log only in v1.8.0)", "FailedScheduling",
     "representative pod team-b/moe-w-1 of gangGroupID team-b/moe already exists",
     Outcome("PreEnqueue", "UnschedulableAndUnresolvable", "GangRepresentative", form="P8")),
    ("L1 older release: members not collected", "FailedScheduling",
     "gang child pod not collect enough, gangName: team-b/moe, podName: team-b/moe-w-0",
     Outcome("PreFilter", "Unschedulable", "GangBasicCheckUnsatisfied", form="L1")),
    ("L2 older release: schedule cycle invalid", "FailedScheduling",
     "gang scheduleCycle not valid, gangName: team-b/moe, podName: team-b/moe-w-0",
     Outcome("PreFilter", "Unschedulable", "GangScheduleCycleInvalid", form="L2")),
    # kube-scheduler v1.37.2's own gangs (GangScheduling), framed as KS137 frames them: a
    # member's Event message is its status's reasons joined with ", " (Status.Message); a
    # member that fit in a refused pod-group cycle gets errPodGroupUnschedulable first, then
    # the group's status, to which the PodGroupPostFilter's text (DefaultPreemption's,
    # "pod group preemption: " + its message) was appended (schedule_one_podgroup.go:795-801,
    # 869-870; defaultpreemption/default_preemption.go:521-525;
    # preemption/podgrouppreemption.go:217)
    ("GS1 a member that fit, its gang short of minCount", "FailedScheduling",
     "pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "
     "pod group preemption: No preemption victims found for incoming preemptor",
     Outcome("PostFilter", "Rejected", "GangMinCountUnsatisfiable", form="GS1",
             already_wait_for_bound=2)),
    ("GS1 a member the cycle did not reach (the group's status, cloned)", "FailedScheduling",
     "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining",
     Outcome("PostFilter", "Rejected", "GangMinCountUnsatisfiable", form="GS1",
             already_wait_for_bound=0)),
    ("GS2 a PlacementFeasible wait left at the cycle's end", "FailedScheduling",
     "pod group is unschedulable, minCount (4) is not yet satisfied: 2 scheduled, 1 remaining",
     Outcome("PostFilter", "Rejected", "GangMinCountNotYetSatisfied", form="GS2",
             already_wait_for_bound=2)),
    ("GS3 the Permit wait (no Event of its own)", "FailedScheduling",
     "waiting for minCount pods from a gang to be scheduled",
     Outcome("Permit", "Wait", "GangWaitingForMinCount", form="GS3")),
    ("GS4 PreEnqueue: the PodGroup missing (no Event)", "FailedScheduling",
     'waiting for pods\'s pod group "llm" to appear in scheduling queue',
     Outcome("PreEnqueue", "UnschedulableAndUnresolvable", "GangNotReadyForScheduling",
             form="GS4")),
    ("GS4 PreEnqueue: too few pods (no Event)", "FailedScheduling",
     "waiting for minCount pods from a gang to appear in scheduling queue",
     Outcome("PreEnqueue", "UnschedulableAndUnresolvable", "GangNotReadyForScheduling",
             form="GS4")),
    ("GS4 PreEnqueue: a CompositePodGroup tree short of its quorum (no Event)",
     "FailedScheduling", 'waiting for composite pod group "train" tree to meet quorum',
     Outcome("PreEnqueue", "UnschedulableAndUnresolvable", "GangNotReadyForScheduling",
             form="GS4")),
    # the real texts, as kube-scheduler v1.37.2 wrote them on the native control plane
    # (tests/data/native-v1.37.2/{f-job-workload,h-preemption}/events.json: placements
    # framing, KS137 schedule_one_podgroup.go:1041,1141; DefaultPreemption's pod-group text)
    ("GS1 real: a member the cycle did not reach, in the placements frame",
     "FailedScheduling",
     "pod group is unschedulable, 0/1 placements are available, first placement status: "
     "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining",
     Outcome("PostFilter", "Rejected", "GangMinCountUnsatisfiable", form="GS1",
             already_wait_for_bound=0)),
    ("GS1 real: a member that fit while the gang's preemption is under way",
     "FailedScheduling",
     "pod group is unschedulable, 0/1 placements are available, first placement status: "
     "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining, pod group preemption: "
     "ongoing preemption on nominated nodes",
     Outcome("PostFilter", "Rejected", "GangMinCountUnsatisfiable", form="GS1",
             already_wait_for_bound=1)),
    ("GS5 real: the pod group refused before its cycle (SchedulerError)", "FailedScheduling",
     "all pods in a single pod group should have the same priority as the pod group's "
     "priority, got 1000 and 0",
     Outcome("PreFilter", "Error", "PodGroupValidationFailed", form="GS5")),
    ("GS5 members of two schedulers", "FailedScheduling",
     'all pods in a single pod group should have the same .spec.schedulerName set, got: '
     '"other" and "default-scheduler"',
     Outcome("PreFilter", "Error", "PodGroupValidationFailed", form="GS5")),
    ("T4 kube-scheduler's GangScheduling Permit timeout (5 minutes)", "FailedScheduling",
     f"{RELEASED}rejected due to timeout after waiting 5m0s at plugin GangScheduling.",
     Outcome("Permit", "Timeout", "PermitTimeout", form="T4")),
    ("FIT a native member's own fit error in a pod-group cycle (no PostFilter text)",
     "FailedScheduling", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
     Outcome("Filter", "Unschedulable", "Insufficient nvidia.com/gpu", culprit=ME, form="FIT",
             fit_error="0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")),
    ("unreadable message is kept as Unschedulable", "FailedScheduling",
     "running PreBind plugin \"VolumeBinding\": binding volumes: timed out",
     Outcome("Filter", "Unschedulable", "FailedScheduling", parsed=False)),
]


@pytest.mark.parametrize("event_reason,message,expected", [s[1:] for s in SCENARIOS],
                         ids=[s[0] for s in SCENARIOS])
def test_parse_scheduler_event(event_reason: str, message: str, expected: Outcome) -> None:
    assert parse_scheduler_event(event_reason, message, NS, POD) == expected


def test_every_catalogue_row_has_a_scenario_and_a_source() -> None:
    covered = {s[3].form for s in SCENARIOS}
    assert {form.id for form in CATALOGUE} - covered == {"F4"}  # F4: a cut message of a row
    assert any(s[3].truncated for s in SCENARIOS)
    for form in CATALOGUE:
        assert form.source.startswith(("K ", "KS ", "KS137 ", "Koordinator before")), form.id
        assert any(ch.isdigit() for ch in form.source), form.id  # file:line


@pytest.mark.parametrize("message,expected", [
    ("0/8 nodes are available: 8 Insufficient nvidia.com/gpu.", "Insufficient nvidia.com/gpu"),
    ("0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
     "2 Insufficient cpu.", "Insufficient cpu"),
    ("0/0 nodes are available: .", None),
    ("no nodes", None),
], ids=["one reason", "two reasons", "empty", "not a fit error"])
def test_dominant_fit_reason(message: str, expected: str | None) -> None:
    assert dominant_fit_reason(message) == expected


def test_fit_clause_drops_the_post_filter_text() -> None:
    assert fit_clause("0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate,"
                      " preemption: 0/2 nodes are available: 2 Preemption is not helpful for "
                      "scheduling.") == "0/2 nodes are available: 2 Insufficient cpu."
    assert fit_clause("0/2 nodes are available: GangGroup \"a/b\" gets rejected") is None


def _classify(items: list[dict]) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for item in items:
        if item["kind"] != "Event":
            continue
        involved = item["involvedObject"]
        out = parse_scheduler_event(item["reason"], item["message"], involved["namespace"],
                                    involved["name"])
        assert out.parsed and out.form, item["message"]
        counts[(out.form, out.reason, out.already_wait_for_bound)] += 1
    return counts


# The recording's 4,441 Events by form, reason and alreadyWaitForBound, counted by hand from its
# messages (grep): 918 taint fit errors + 536 GPU fit errors; 1,834 + 103 + 231 + 29 PreFilter
# refusals; 607 + 179 releases; 2 basic checks while the first pods were deleted; 1 round end;
# 1 Unreserve release.
RECORDING_FORMS = {
    ("FIT", "node(s) had untolerated taint(s)", None): 918,
    ("FIT", "Insufficient nvidia.com/gpu", None): 536,
    ("B2", "GangGroupRejected", 0): 1834 + 103,
    ("B2", "GangGroupRejected", 1): 231,
    ("B2", "GangGroupRejected", 2): 29,
    ("F3", "GangGroupRejected", 2): 607,
    ("F3", "GangGroupRejected", 1): 179,
    ("B1c", "GangBasicCheckUnsatisfied", None): 2,
    ("N1", "GangRoundEnded", None): 1,
    ("U1", "GangGroupRejected", None): 1,
}


def test_every_event_of_the_real_recording_is_read() -> None:
    if not RECORDING.exists():
        pytest.skip(f"{RECORDING} is not on this machine")
    items = json.loads(gzip.decompress(RECORDING.read_bytes()))["items"]
    counts = _classify(items)
    assert sum(counts.values()) == 4441
    assert dict(counts) == RECORDING_FORMS


def test_the_committed_excerpt_of_each_form_is_read() -> None:
    """``tests/data/koord-v1.8.0-gpu-short-forms.json``: one Event of each distinct message
    form of the recording (tests/data/README.md)."""
    items = json.loads(FORMS_EXCERPT.read_text())["items"]
    counts = _classify(items)
    assert set(counts) == set(RECORDING_FORMS)  # the taint and GPU refusals share a key
    assert sum(counts.values()) == len([i for i in items if i["kind"] == "Event"]) == 11


NATIVE_RECORDINGS = Path(__file__).parents[1] / "data" / "native-v1.37.2"
"""kube-scheduler v1.37.2's Events recorded per scenario on the native control plane
(``tests/data/native-v1.37.2/<scenario>/events.json``, ``observe.py`` there)."""


@pytest.mark.skipif(not list(NATIVE_RECORDINGS.glob("*/events.json")),
                    reason="the native recordings are not here")
def test_every_failed_scheduling_of_the_native_recordings_is_read() -> None:
    """Every FailedScheduling Event kube-scheduler v1.37.2 wrote in the recorded scenarios is
    read by a row: a member's own fit error (FIT, with its culprit and fit error), a member
    refused for its gang's minCount (GS1) or its pod group refused before the cycle (GS5)."""
    counts: collections.Counter[str] = collections.Counter()
    for path in sorted(NATIVE_RECORDINGS.glob("*/events.json")):
        doc = json.loads(path.read_text())
        for event in doc["items"] if isinstance(doc, dict) else doc:
            if event.get("reason") != "FailedScheduling":
                continue
            assert (event.get("reportingComponent") or event["source"]["component"]) == \
                "default-scheduler"
            involved = event["involvedObject"]
            out = parse_scheduler_event("FailedScheduling", event["message"],
                                        involved["namespace"], involved["name"])
            assert out.parsed and out.attempt, event["message"]
            if out.form == "FIT":
                assert out.culprit == f"{involved['namespace']}/{involved['name']}"
                assert out.fit_error == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
            counts[out.form] += 1
    assert set(counts) <= {"FIT", "GS1", "GS5"} and {"FIT", "GS1"} <= set(counts), counts


def test_gangstates_own_hold_makes_no_cycle_record() -> None:
    """A FailedScheduling Event, and the PodScheduled condition, of a pod the shim refused
    because gangstate holds its gang (``G1``): the Event is published as it is, no cycle
    record is derived from either (the scheduler did not try the pod), and the drop says
    why (``gangstate-hold``, not ``not-an-attempt``)."""
    from producers.watch.watching import Drop, GangRouter, Publish
    from tests.fixtures.builders import kube_pod

    router = GangRouter()
    router.route("pods", "ADDED", kube_pod(POD, NS, gang="moe", min_available=3), None, 0)
    message = f"0/8 nodes are available: {HELD}.{PREEMPTION}"
    actions = router.route("events", "ADDED", {
        "metadata": {"name": f"{POD}.1", "namespace": NS, "uid": "ev-1"},
        "involvedObject": {"kind": "Pod", "namespace": NS, "name": POD, "uid": f"uid-{POD}"},
        "reason": "FailedScheduling", "type": "Warning", "message": message,
        "reportingComponent": "koord-scheduler"}, None, 1_000_000)
    assert [a.record["schema"] if isinstance(a, Publish) else a for a in actions] == [
        "gangstate.kube/v1", Drop("gangstate-hold")]
    refused = kube_pod(POD, NS, gang="moe", min_available=3, rv="2", conditions=[
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": message, "lastTransitionTime": "2026-11-02T09:00:01Z"}])
    actions = router.route("pods", "MODIFIED", refused, None, 2_000_000)
    assert [a for a in actions if not isinstance(a, Publish)] == [Drop("gangstate-hold")]
    assert [a.record["schema"] for a in actions if isinstance(a, Publish)] == [
        "gangstate.kube/v1"]
