"""Commands to the scheduler shim about the gang group's representative: a switch away from a
representative with scheduling gates (``RepresentativeGated``), and an election after the
representative was deleted (``RepresentativeDeleted``). No Event reason, no timer.

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from dataclasses import replace

from ..records import CycleObserved, PodObserved
from ..state import GangState
from ..settings import Output
from .base import Decision, Rule, Step, command
from .hold import hold

GATED_SWITCH_INTERVAL_SECONDS = 10
"""After a ``RepresentativeGated`` switch, the earliest another one is issued for the gang
(seconds of event time). The shim's records keep naming the gated representative until the
command is applied (at the group's next PreEnqueue, or after PostFilter) and its ack is back:
0.4-0.7 s on the real scheduler (docs/shim.md); a switch still called for later (the command
was lost or refused, or the gated pod became the representative again) is issued again."""


def decide_gated_representative(state: GangState, s: Step, out: list[Output]) -> GangState:
    """SwitchRepresentative (reason ``RepresentativeGated``): the scheduler shim reports as
    the gang group's representative a member that has scheduling gates, while the gang passes
    its checks (``hold`` is ``None``: at least minMember members are free of gates) and
    another member without gates is pending. koord-scheduler v1.8.0 lets only the
    representative into its scheduling queue (rules P7, G2); PreEnqueue plugins run in map
    order, so a gated pod can become it, and while its gates stay
    nothing moves the group (seen on the real scheduler: 4 of 8 tries stuck for good without
    the shim; with it, the switch bound the group 0.4-0.7 s after the command, docs/shim.md).
    The target is the earliest-arrived pending member without gates. At most one switch per
    ``GATED_SWITCH_INTERVAL_SECONDS`` of event time (``last_switch_at``). Evaluated on the
    shim's cycle records and on Pod records (the shim's record naming the representative can
    reach the fold before the Pod record of the member that completes the gang: the scheduler
    refuses that member at once, and nothing retries it), with the representative the shim
    last reported (``state.commands.representative``, only while the gang has shim records,
    ``shim_at``). Other records (``s.rec`` neither a ``CycleObserved`` nor a ``PodObserved``)
    change nothing."""
    rec = s.rec
    if not isinstance(rec, (CycleObserved, PodObserved)):
        return state
    if isinstance(rec, CycleObserved) and not rec.shim:
        return state
    rep = state.commands.representative
    if rep is None or state.shim_at is None:
        return state
    found = state.member_by_name(rep)
    if found is None or not found[1].gated or hold(state) is not None:
        return state
    last_switch_at = state.commands.last_switch_at
    if last_switch_at is not None \
            and rec.at < last_switch_at + GATED_SWITCH_INTERVAL_SECONDS * 1_000_000:
        return state
    ns = state.namespace
    target = next((m.name for m in state.members.values()
                   if m.pending and not m.gates and f"{ns}/{m.name}" != rep), None)
    if target is None:
        return state
    cycle = rec.cycle if isinstance(rec, CycleObserved) else None
    state, cmd = command(state, "SwitchRepresentative", rep, f"{ns}/{target}",
                         "RepresentativeGated", rec.at, cycle)
    out.append(cmd)
    state.commands = replace(state.commands, last_switch_at=rec.at)
    return state


def decide_elect(state: GangState, s: Step, out: list[Output]) -> GangState:
    """ElectRepresentative: the representative pod (``s.before_rep``, ``ns/name``) was deleted
    (``s.rec`` a ``PodObserved`` of type ``DELETED``) while members still wait to be
    scheduled; name the earliest-arrived pending member (Koordinator drops a deleted
    representative, ``PodDeleted``, and issue #2773 shows a group left without one)."""
    rec, before_rep = s.rec, s.before_rep
    if not isinstance(rec, PodObserved):
        return state
    if rec.type != "DELETED" or before_rep is None or before_rep != f"{rec.namespace}/{rec.name}":
        return state
    if state.commands.representative is not None:
        return state
    pending = [m.name for m in state.members.values() if m.pending]
    if not pending:
        return state
    state, cmd = command(state, "ElectRepresentative", before_rep,
                         f"{state.namespace}/{pending[0]}", "RepresentativeDeleted", rec.at, None)
    out.append(cmd)
    return state


ELECT: Decision = Decision("elect", decide_elect)
GATED: Decision = Decision("gated-representative", decide_gated_representative)
RULE: Rule = Rule("representative", (), (), (ELECT, GATED))
