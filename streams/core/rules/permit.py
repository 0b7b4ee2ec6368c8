"""The Permit wait: members that waited at Permit for the gang's whole waiting time.

Reason: ``GangPermitTimeout`` (Warning). Timer: ``permit`` (the waiting time of members
waiting at Permit ended). Also reports the scheduler's own ``Timeout`` records of the latest
cycle.

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..records import CycleObserved
from ..settings import FoldSettings, Output
from ..state import NO_PERMIT, GangState, Permit
from .base import Decision, Reason, Rule, Step, TimerRule, emit, plural


def _message(gang: str, f: dict[str, Any]) -> str:
    return (f"gang {gang}: {f['waiting']} "
            f"{plural(f['waiting'], 'member', 'members')} waited at Permit for the full "
            f"waiting time of {f['waiting_seconds']}s without minMember {f['min_member']} "
            f"ready together; they are rejected and retried")


TIMEOUT: Reason = Reason("GangPermitTimeout", "Warning", _message)


def warn_permit_timeout(state: GangState, at: int) -> tuple[GangState, list[dict[str, Any]]]:
    """Emit ``GangPermitTimeout`` for members still waiting at Permit when the gang's waiting
    time ended at ``at`` (kube-scheduler rejects them: ``rejected due to timeout after waiting
    ... at plugin Coscheduling``)."""
    out: list[dict[str, Any]] = []
    spec = state.spec
    if spec is not None and state.waiting:
        state = emit(state, TIMEOUT.name, TIMEOUT,
                      {"waiting": state.waiting, "min_member": spec.min_member,
                       "waiting_seconds": spec.permit_wait_seconds}, at, out)
    state.permit = replace(state.permit, warned=True)
    return state, out


def decide_permit(state: GangState, s: Step, out: list[Output]) -> GangState:
    """Track the Permit wait (its start, the record's event time in microseconds, feeds the
    timer) and report the scheduler's own ``Timeout`` records of the latest cycle: the
    family's ``Decision`` on each record ``s.rec``."""
    rec = s.rec
    waiting = state.waiting
    since = state.permit.waiting_since
    if waiting and since is None:
        state.permit = Permit(rec.at, False)
    elif not waiting and since is not None:
        state.permit = NO_PERMIT
    spec = state.spec
    if isinstance(rec, CycleObserved) and rec.status == "Timeout" and spec is not None \
            and rec.cycle == state.cycle:
        timed_out = sum(1 for status, _ in state.outcomes.values() if status == "Timeout")
        state = emit(state, TIMEOUT.name, TIMEOUT,
                      {"waiting": timed_out, "min_member": spec.min_member,
                       "waiting_seconds": spec.permit_wait_seconds}, rec.at, out)
    return state


def permit_due(state: GangState, settings: FoldSettings) -> int | None:
    """When the Permit waiting time of the members waiting at Permit ends, or ``None``."""
    spec = state.spec
    permit = state.permit
    if permit.waiting_since is not None and not permit.warned and spec is not None:
        return permit.waiting_since + spec.permit_wait_micros
    return None


def _fire(state: GangState, due: int, settings: FoldSettings) -> tuple[GangState, list[Output]]:
    return warn_permit_timeout(state, due)


TIMER: TimerRule = TimerRule("permit", "Permit waiting time ended", permit_due, _fire)
DECISION: Decision = Decision("permit", decide_permit)
RULE: Rule = Rule("permit", (TIMEOUT,), (TIMER,), (DECISION,))
