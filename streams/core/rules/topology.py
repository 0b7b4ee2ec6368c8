"""A gang that asks for network-topology-aware placement where koord-scheduler has no cluster
network topology (rule NT1 of docs/koordinator-rules.md).

koord-scheduler v1.8.0 refuses the first member of such a gang's round in BeforePreFilter with
``no cluster network topology`` and opens no round; the member stays the gang group's
representative, so the other members are refused at PreEnqueue behind it without a word, and it
is retried only when kube-scheduler flushes its unschedulable pods (Coscheduling registers no
cluster events), failing the same way each time. Its one ``FailedScheduling`` Event is all the
user sees. The topology exists only when koord-scheduler runs with
``--enable-network-topology-manager`` (off by default) and a ClusterNetworkTopology named
``default`` exists.

Reason: ``GangTopologyUnavailable`` (Warning), facts ``refused`` (names of the pending members
whose last attempt was refused so, sorted) and ``source`` (the object whose
``network-topology-spec`` annotation asks for it: ``Pod/<name>`` or ``PodGroup/<name>``); said
again only when they change. No timer.

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from typing import Any

from ..records import CycleObserved
from ..settings import Output
from ..state import GangState, Member
from .base import Decision, Reason, Rule, Step, emit, plural

NO_TOPOLOGY = "NoClusterNetworkTopology"
"""The cycle record reason of the refusal (``producers/watch/scheduler_events.py`` form
``B3``: ``0/N nodes are available: no cluster network topology.``)."""

ANNOTATION = "gang.scheduling.koordinator.sh/network-topology-spec"


def _message(gang: str, f: dict[str, Any]) -> str:
    names = f["refused"]
    who = ", ".join(names)
    return (f"gang {gang} asks for network-topology-aware placement ({ANNOTATION} on "
            f"{f['source']}) but koord-scheduler has no cluster network topology: it refused "
            f"{who} at PreFilter (\"no cluster network topology\") and keeps the gang's other "
            f"members out at PreEnqueue behind {plural(len(names), 'it', 'them')}; every retry "
            f"fails the same way until koord-scheduler runs with "
            f"--enable-network-topology-manager and a ClusterNetworkTopology named "
            f"\"default\" exists")



def refused(state: GangState) -> list[str]:
    """Names (sorted) of the gang's pending members whose last attempt was refused for want of
    a cluster network topology (``Member.reason`` ``NoClusterNetworkTopology``)."""
    return sorted(m.name for m in state.members.values()
                  if m.pending and m.reason == NO_TOPOLOGY)


def topology_facts(state: GangState) -> dict[str, Any] | None:
    """The facts of ``GangTopologyUnavailable`` (``refused``, ``source``), or ``None`` when no
    pending member's last attempt was refused so."""
    names = refused(state)
    if not names:
        return None
    return {"refused": names, "source": state.spec_source or "its pods"}


def decide_topology(state: GangState, s: Step, out: list[Output]) -> GangState:
    """``GangTopologyUnavailable`` on a cycle record refused for want of a cluster network
    topology (the fold has applied it to the member: ``Member.reason``)."""
    rec = s.rec
    if not isinstance(rec, CycleObserved) or rec.reason != NO_TOPOLOGY:
        return state
    facts = topology_facts(state)
    if facts is None:
        return state
    return emit(state, UNAVAILABLE.name, UNAVAILABLE, facts, s.at, out)


def finding(state: GangState) -> list[dict[str, Any]]:
    """``GangTopologyUnavailable`` as a finding of ``describe gang`` while a pending member's
    last attempt was refused so."""
    facts = topology_facts(state)
    if facts is None:
        return []
    return [{"reason": UNAVAILABLE.name, "type": UNAVAILABLE.type,
             "message": _message(state.gang, facts), "facts": facts}]


def why(state: GangState, member: Member) -> dict[str, Any] | None:
    """Why pending ``member`` is held, for ``explain pod``: a refused member at PreFilter
    (BeforePreFilter), any other behind it at PreEnqueue (it stays the gang group's
    representative: K core/core.go:316-329 returns before the round opens); ``None`` when no
    member was refused so."""
    facts = topology_facts(state)
    if facts is None or not member.pending:
        return None
    names = facts["refused"]
    if member.name in names:
        held_at, held_by = "PreFilter", "Coscheduling, no cluster network topology"
    else:
        held_at = "PreEnqueue"
        held_by = f"Coscheduling, behind the representative {state.namespace}/{names[0]}"
    return {"held_at": held_at, "held_by": held_by,
            "reasons": [{"reason": UNAVAILABLE.name, "facts": facts,
                         "message": _message(state.gang, facts)}],
            "unblock": [unblock(state, facts)]}


def unblock(state: GangState, facts: dict[str, Any]) -> str:
    """What would let the gang through: the topology, or the gang without the annotation. A
    PodGroup's annotations are read again on every update of it (K core/gang_cache.go:274), a
    pod's only when the gang is first built from it (K core/gang.go:101-105): an annotation
    gang lives until its last pod is deleted."""
    source = facts["source"]
    if source.startswith("PodGroup/"):
        instead = f"remove {ANNOTATION} from {source.replace('/', ' ', 1)}"
    else:
        instead = (f"delete the gang's pods and create them without {ANNOTATION} (koord-"
                   f"scheduler reads it from the pod the gang was first built from)")
    return (f"run koord-scheduler with --enable-network-topology-manager and create the "
            f"ClusterNetworkTopology \"default\", or {instead}")


UNAVAILABLE: Reason = Reason("GangTopologyUnavailable", "Warning", _message, unblock)
DECISION: Decision = Decision("topology", decide_topology)
RULE: Rule = Rule("topology", (UNAVAILABLE,), (), (DECISION,), finding, why)
