"""Members lost after the gang was scheduled (``streams.core.lost``), and their return.

Reasons: ``GangMembersLost`` (Warning) and ``GangMembersRestored`` (Normal). Timer: ``lost``
(a loss settled).

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .. import lost as losses
from ..settings import FoldSettings, Output
from ..state import NO_LOSS, GangState
from .base import Decision, Reason, Rule, Step, TimerRule, diagnostic, emit

LOST: Reason = Reason("GangMembersLost", "Warning", losses.lost_message)
RESTORED: Reason = Reason("GangMembersRestored", "Normal", losses.restored_message)
LOST_KEY = "GangMembersLost"
"""The ``emitted`` key of ``GangMembersLost``: present while a loss told has not ended (its
end is ``GangMembersRestored``, or the gang going away)."""


def warn_lost(state: GangState, at: int) -> tuple[GangState, list[dict[str, Any]]]:
    """Emit ``GangMembersLost`` at event time ``at`` (its settling timer, ``lost.lost_due``,
    or a record at or after it) with ``lost.lost_facts``; marks the losses as told."""
    out: list[dict[str, Any]] = []
    facts = losses.lost_facts(state)
    state.lost = replace(state.lost, told=True)
    if facts is not None:
        state = emit(state, LOST_KEY, LOST, facts, at, out)
    return state, out


def decide_lost(state: GangState, s: Step, out: list[Output]) -> GangState:
    """Members lost after the gang was scheduled (``streams.core.lost``): remember a loss
    (``s.before`` against ``state``, at ``s.at``), ``GangMembersLost`` when its settling time
    has passed by this record, and ``GangMembersRestored`` when a told loss ends with minMember
    members bound again."""
    before, rec, at = s.before, s.rec, s.at
    state = losses.track_losses(before, state, rec, at)
    if not state.lost.entries and LOST_KEY in state.emitted:
        # the series of GangMembersLost ends: told as restored when minMember members are
        # bound again, silently when the gang went away; a later loss is news again
        restored = losses.restored_facts(before, state)
        if restored is not None:
            out.append(diagnostic(state, RESTORED, restored, at))
        state.emitted = {k: v for k, v in state.emitted.items() if k != LOST_KEY}
        state.lost = NO_LOSS
    due = losses.lost_due(state)
    if due is not None and rec.at >= due:
        state, fired = warn_lost(state, rec.at)
        out.extend(fired)
    return state


def _due(state: GangState, settings: FoldSettings) -> int | None:
    return losses.lost_due(state)


def _fire(state: GangState, due: int, settings: FoldSettings) -> tuple[GangState, list[Output]]:
    return warn_lost(state, due)


TIMER: TimerRule = TimerRule("lost", "members lost, settled", _due, _fire)
DECISION: Decision = Decision("lost", decide_lost)
RULE: Rule = Rule("lost", (LOST, RESTORED), (TIMER,), (DECISION,))
