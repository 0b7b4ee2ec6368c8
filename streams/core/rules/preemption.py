"""Preemption for the gang (rules PR1-PR5, ``streams.core.preemption``): victims terminating for
its members, and a preemption that freed room the gang cannot use.

Reasons: ``GangPreempting`` (Normal) and ``GangPreemptionWasted`` (Warning). Timer:
``preemption`` (the earlier of the two due times).

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from typing import Any

from .. import preemption as preemptions
from ..settings import FoldSettings, Output
from ..state import GangState
from .base import (Decision, Reason, Rule, Step, TimerRule, diagnostic, facts_digest,
                   skips_gang_checks)

PREEMPTING: Reason = Reason(preemptions.PREEMPTING, "Normal", preemptions.preempting_message)
WASTED: Reason = Reason(preemptions.WASTED, "Warning", preemptions.wasted_message)


def _preemption_live(state: GangState) -> bool:
    """True when a preemption may be told: the gang has members, is not scheduled and does
    not skip the gang checks."""
    spec = state.spec
    return state.preemption is not None and bool(state.members) \
        and not skips_gang_checks(state) \
        and not (spec is not None and state.bound >= max(spec.min_member, 1))


def _preempting_facts(state: GangState) -> dict[str, Any] | None:
    spec = state.spec
    return preemptions.preempting_facts(state.preemption, spec.min_member if spec else None)


def preemption_due(state: GangState) -> int | None:
    """When ``GangPreempting`` or ``GangPreemptionWasted`` is due (``preemption.
    preempting_due``, ``preemption.wasted_due``), the earlier; ``None`` when neither is."""
    if not _preemption_live(state):
        return None
    due = [d for d in (preemptions.preempting_due(state.preemption),
                       preemptions.wasted_due(state.preemption, state.episode)) if d is not None]
    return min(due) if due else None


def warn_preemption(state: GangState, at: int) -> tuple[GangState, list[dict[str, Any]]]:
    """Emit what of the preemption is due by event time ``at`` (rules PR1-PR5,
    ``streams.core.preemption``): ``GangPreemptionWasted`` (Warning, on the gang's pods and on
    every victim) once the victims are gone and the gang still fails, else ``GangPreempting``
    (Normal, on the gang's pods: who was preempted, where, for which member, since when, the
    nominated nodes) while victims terminate. Assigns the state's fields (the fold's own copy)
    and returns it with the outputs."""
    out: list[dict[str, Any]] = []
    p = state.preemption
    if p is None or not _preemption_live(state):
        return state, out
    wasted = preemptions.wasted_due(p, state.episode)
    if wasted is not None and wasted <= at and state.episode is not None:
        spec = state.spec
        wasted_facts = preemptions.wasted_facts(p, state.episode,
                                                spec.min_member if spec else None, state.bound)
        out.append(diagnostic(state, WASTED, wasted_facts, at,
                              also=tuple(preemptions.victims_involved(p))))
        state.preemption = p._replace(wasted_at=at)
        return state, out
    facts = _preempting_facts(state)
    due = preemptions.preempting_due(p)
    if facts is not None and due is not None and due <= at:
        shown = {**facts, "nominated": dict(p.nominated)}
        out.append(diagnostic(state, PREEMPTING, shown, at,
                              facts_id=facts_digest(facts)))
        state.preemption = p._replace(
            told_upto=max(v.seen_at for v in preemptions.terminating(p)))
    return state, out


def decide_preemption(state: GangState, s: Step, out: list[Output]) -> GangState:
    """``warn_preemption`` when a record is decided (``s.at``, microseconds of event time) at
    or after its due time (``PartitionFold`` fires the timer first; this covers a fold stepped
    record by record and a failed attempt that makes the waste evident at once)."""
    at = s.at
    due = preemption_due(state)
    if due is None or at < due:
        return state
    state, fired = warn_preemption(state, at)
    out.extend(fired)
    return state


def _due(state: GangState, settings: FoldSettings) -> int | None:
    return preemption_due(state)


def _fire(state: GangState, due: int, settings: FoldSettings) -> tuple[GangState, list[Output]]:
    return warn_preemption(state, due)


TIMER: TimerRule = TimerRule("preemption", "preemption settled", _due, _fire)
DECISION: Decision = Decision("preemption", decide_preemption)
RULE: Rule = Rule("preemption", (PREEMPTING, WASTED), (TIMER,), (DECISION,))
