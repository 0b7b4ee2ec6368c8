"""The gang is scheduled: minMember members bound.

Reason: ``GangScheduled`` (Normal). No timer.

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from typing import Any

from ..state import GangState
from .base import Reason, Rule, emit


def _message(gang: str, f: dict[str, Any]) -> str:
    return f"gang {gang} is scheduled: {f['bound']} of minMember {f['min_member']} pods bound"


SCHEDULED: Reason = Reason("GangScheduled", "Normal", _message)


def decide_scheduled(state: GangState, at: int, out: list[dict[str, Any]]) -> GangState:
    spec = state.spec
    if spec is None or not state.members:
        return state
    bound = state.bound
    if bound < spec.min_member or bound == 0:
        return state
    state = emit(state, SCHEDULED.name, SCHEDULED,
                  {"bound": bound, "min_member": spec.min_member}, at, out)
    state.ever_scheduled = True
    return state


RULE: Rule = Rule("scheduled", (SCHEDULED,))
