"""Table of named scenarios for ``producers.watch.scheduler_events``: scheduler Event text -> outcome.

Messages are the formats of Koordinator's Coscheduling plugin and kube-scheduler (see the module
docstring for their sources); expected values are worked out by hand.
"""

from __future__ import annotations

import pytest

from producers.watch.scheduler_events import Outcome, dominant_fit_reason, parse_scheduler_event

NS, POD = "team-b", "moe-w-0"

SCENARIOS = [
    ("plain fit error",
     "FailedScheduling", "0/8 nodes are available: 8 Insufficient nvidia.com/gpu.",
     Outcome("Filter", "Unschedulable", "Insufficient nvidia.com/gpu")),
    ("fit error, the reason with most nodes wins",
     "FailedScheduling",
     "0/5 nodes are available: 2 Insufficient cpu, 3 Insufficient memory.",
     Outcome("Filter", "Unschedulable", "Insufficient memory")),
    ("fit error tie: first written wins",
     "FailedScheduling",
     "0/4 nodes are available: 2 Insufficient cpu, 2 node(s) had untolerated taint "
     "{node-role.kubernetes.io/control-plane: }.",
     Outcome("Filter", "Unschedulable", "Insufficient cpu")),
    ("fit error followed by a preemption clause",
     "FailedScheduling",
     "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are "
     "available: 8 No preemption victims found for incoming pod.",
     Outcome("Filter", "Unschedulable", "Insufficient nvidia.com/gpu")),
    ("GangGroup rejection naming another member: this pod was waiting",
     "FailedScheduling",
     'GangGroup "team-b/moe" gets rejected due to member Pod "moe-w-2" is unschedulable with '
     'reason "0/8 nodes are available: 8 Insufficient nvidia.com/gpu.", alreadyWaitForBound: 0',
     Outcome("PostFilter", "Rejected", "GangGroupRejected", culprit="moe-w-2")),
    ("GangGroup rejection naming another member as ns/name",
     "FailedScheduling",
     'GangGroup "team-b/moe" gets rejected due to member Pod "team-b/moe-w-2" is unschedulable '
     'with reason "no candidate topology nodes", alreadyWaitForBound: 1',
     Outcome("PostFilter", "Rejected", "GangGroupRejected", culprit="team-b/moe-w-2")),
    ("Gang rejection naming this pod: it is the member that failed",
     "FailedScheduling",
     'Gang "team-b/moe" gets rejected due to member Pod "moe-w-0" is unschedulable with reason '
     '"0/3 nodes are available: 3 Insufficient cpu."',
     Outcome("Filter", "Unschedulable", "Insufficient cpu")),
    ("fit error then the PostFilter message naming this pod",
     "FailedScheduling",
     '0/8 nodes are available: 8 Insufficient nvidia.com/gpu. Gang "team-b/moe" gets rejected '
     'due to member Pod "moe-w-0" is unschedulable with reason "0/8 nodes are available: 8 '
     'Insufficient nvidia.com/gpu.", alreadyWaitForBound: 0',
     Outcome("Filter", "Unschedulable", "Insufficient nvidia.com/gpu")),
    ("this pod failed without a fit error in the reason",
     "FailedScheduling",
     'Gang "team-b/moe" gets rejected due to member Pod "moe-w-0" is unschedulable with reason '
     '"no candidate topology nodes"',
     Outcome("PostFilter", "Unschedulable", "GangRejected")),
    ("Koordinator's own PostFilter status",
     "FailedScheduling", 'Gang "team-b/moe" gets rejected due to pod is unschedulable',
     Outcome("PostFilter", "Unschedulable", "GangRejected")),
    ("rejected in Unreserve because of another member",
     "FailedScheduling", 'Gang "team-b/moe" gets rejected due to Pod "moe-w-1" in Unreserve',
     Outcome("Unreserve", "Rejected", "GangGroupRejected", culprit="moe-w-1")),
    ("own Unreserve",
     "FailedScheduling", 'Gang "team-b/moe" gets rejected due to Pod "moe-w-0" in Unreserve',
     Outcome("Unreserve", "Unschedulable", "GangUnreserve")),
    ("Permit timeout",
     "FailedScheduling", "rejected due to timeout after waiting 10m0s at plugin Coscheduling",
     Outcome("Permit", "Timeout", "PermitTimeout")),
    ("older release: members not collected",
     "FailedScheduling", "gang child pod not collect enough, gangName: team-b/moe, podName: "
     "team-b/moe-w-0",
     Outcome("PreFilter", "Unschedulable", "GangBasicCheckUnsatisfied")),
    ("older release: schedule cycle invalid",
     "FailedScheduling", "gang scheduleCycle not valid, gangName: team-b/moe, podName: "
     "team-b/moe-w-0",
     Outcome("PreFilter", "Unschedulable", "GangScheduleCycleInvalid")),
    ("unreadable message is kept as Unschedulable",
     "FailedScheduling", "running PreBind plugin \"VolumeBinding\": binding volumes: timed out",
     Outcome("Filter", "Unschedulable", "FailedScheduling", parsed=False)),
    ("Scheduled Event binds to the node",
     "Scheduled", "Successfully assigned team-b/moe-w-0 to gpu-node-7",
     Outcome("Bind", "Bound", "", node="gpu-node-7")),
    ("Scheduled Event with an odd message",
     "Scheduled", "assigned somewhere",
     Outcome("Bind", "Bound", "", node=None, parsed=False)),
]


@pytest.mark.parametrize("event_reason,message,expected", [s[1:] for s in SCENARIOS],
                         ids=[s[0] for s in SCENARIOS])
def test_parse_scheduler_event(event_reason: str, message: str, expected: Outcome) -> None:
    assert parse_scheduler_event(event_reason, message, NS, POD) == expected


@pytest.mark.parametrize("message,expected", [
    ("0/8 nodes are available: 8 Insufficient nvidia.com/gpu.", "Insufficient nvidia.com/gpu"),
    ("0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
     "2 Insufficient cpu.", "Insufficient cpu"),
    ("0/0 nodes are available: .", None),
    ("no nodes", None),
], ids=["one reason", "two reasons", "empty", "not a fit error"])
def test_dominant_fit_reason(message: str, expected: str | None) -> None:
    assert dominant_fit_reason(message) == expected
