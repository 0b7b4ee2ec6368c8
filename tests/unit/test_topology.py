"""``GangTopologyUnavailable`` (``streams.core.rules.topology``, rule NT1): a gang that asks for
network-topology-aware placement where koord-scheduler has no cluster network topology.

Gang ns/g of minMember 2 (annotations, both with a valid ``network-topology-spec``); t-0 and t-1
created at t=0; koord-scheduler refuses t-1 in BeforePreFilter at t=0.5 with ``0/2 nodes are
available: no cluster network topology.`` (the watcher's form B3: PreFilter,
UnschedulableAndUnresolvable, reason ``NoClusterNetworkTopology``), as the real scheduler did
(docs/koordinator-rules.md, NT1). The fold's defaults: ``GangMembersStranded`` 120 s after a
round ran.
"""

from __future__ import annotations

from typing import Any

from streams.core import explain
from streams.core.state import GangState
from streams.core.timefmt import format_time
from tests.fixtures.builders import at, attempt, fold_records, pod, podgroup

SPEC = '{"gatherStrategy":[{"layer":"SpineLayer","strategy":"PreferGather"}]}'
GANG = [pod("t-0", 0, network_topology_spec=SPEC), pod("t-1", 0, network_topology_spec=SPEC)]


def refused(t: float, name: str = "t-1", uid: str = "e1", count: int = 1) -> Any:
    return attempt(name, t, uid, "PreFilter", "UnschedulableAndUnresolvable", count=count,
                   reason="NoClusterNetworkTopology")


def run(records: list[Any], end: float = 300) -> tuple[list[tuple[str, str, dict[str, Any]]],
                                                       GangState]:
    """The diagnostics (observed_at, reason, facts) of folding ``records`` and a tick at
    ``end``, and the gang's state then."""
    store: dict[str, GangState] = {}
    out = fold_records(records, end, store=store)
    told = [(o["observed_at"], o["reason"], o["facts"]) for o in out
            if o["schema"] == "gangstate.diagnostic/v1"]
    return told, store["ns/g"]


MESSAGE = ("gang ns/g asks for network-topology-aware placement "
           "(gang.scheduling.koordinator.sh/network-topology-spec on Pod/t-0) but koord-scheduler "
           "has no cluster network topology: it refused t-1 at PreFilter (\"no cluster network "
           "topology\") and keeps the gang's other members out at PreEnqueue behind it; every "
           "retry fails the same way until koord-scheduler runs with "
           "--enable-network-topology-manager and a ClusterNetworkTopology named \"default\" "
           "exists")


def test_the_refusal_is_told_once_and_the_members_behind_it_are_not_stranded():
    # without the rule the gang heard nothing but GangMembersStranded for t-0 at 120.5 s,
    # advising to delete it (see the control below); the retry at 300 s (kube-scheduler's
    # flush of unschedulable pods) fails the same way and tells nothing new
    told, _ = run(GANG + [refused(0.5), refused(300, count=2)], end=600)
    assert told == [(format_time(at(0.5)), "GangTopologyUnavailable",
                     {"refused": ["t-1"], "source": "Pod/t-0"})]


def test_control_another_prefilter_refusal_is_a_round_and_strands_t0():
    told, _ = run(GANG + [attempt("t-1", 0.5, "e1", "PreFilter", "UnschedulableAndUnresolvable",
                                  reason="GangBasicCheckUnsatisfied")])
    assert told == [(format_time(at(120.5)), "GangMembersStranded",
                     {"stranded": ["t-0"], "after_seconds": 120})]


def test_the_diagnostic_message():
    (diag,) = [o for o in fold_records(GANG + [refused(0.5)])
               if o["schema"] == "gangstate.diagnostic/v1"]
    assert (diag["type"], diag["message"]) == ("Warning", MESSAGE)
    assert [o["name"] for o in diag["involved"]] == ["t-0", "t-1"]


def test_explain_the_refused_member_and_the_one_behind_it():
    _, state = run(GANG + [refused(0.5)])
    rep = explain.why_pod(state, "ns/t-1")
    other = explain.why_pod(state, "ns/t-0")
    assert (rep["held_at"], rep["held_by"]) == ("PreFilter",
                                                "Coscheduling, no cluster network topology")
    assert (other["held_at"], other["held_by"]) == (
        "PreEnqueue", "Coscheduling, behind the representative ns/t-1")
    for why in (rep, other):
        assert [r["reason"] for r in why["reasons"]] == ["GangTopologyUnavailable"]
        assert why["unblock"] == [
            "run koord-scheduler with --enable-network-topology-manager and create the "
            "ClusterNetworkTopology \"default\", or delete the gang's pods and create them "
            "without gang.scheduling.koordinator.sh/network-topology-spec (koord-scheduler "
            "reads it from the pod the gang was first built from)"]
    assert [f["reason"] for f in explain.findings(state)] == ["GangTopologyUnavailable"]


def test_a_podgroup_gang_is_told_to_drop_the_annotation_from_its_podgroup():
    # the PodGroup's annotations are read again on its every update (K core/gang_cache.go:274)
    recs = [podgroup(0, 2, network_topology_spec=SPEC),
            pod("t-0", 0.1, min_available=None, waits_for_podgroup=True),
            pod("t-1", 0.1, min_available=None, waits_for_podgroup=True), refused(0.5)]
    told, state = run(recs)
    assert told == [(format_time(at(0.5)), "GangTopologyUnavailable",
                     {"refused": ["t-1"], "source": "PodGroup/g"})]
    assert explain.why_pod(state, "ns/t-0")["unblock"] == [
        "run koord-scheduler with --enable-network-topology-manager and create the "
        "ClusterNetworkTopology \"default\", or remove "
        "gang.scheduling.koordinator.sh/network-topology-spec from PodGroup g"]


def test_once_the_member_gets_through_nothing_holds_the_gang_for_it():
    # the topology was set up: at 300 s t-1 passes PreFilter and waits at Permit
    recs = GANG + [refused(0.5), attempt("t-1", 300, "e2", "Permit", "Wait")]
    told, state = run(recs, end=301)
    assert [r for _, r, _ in told] == ["GangTopologyUnavailable"]
    assert [f["reason"] for f in explain.findings(state)] == []
    assert explain.why_pod(state, "ns/t-1")["held_at"] == "Permit"
