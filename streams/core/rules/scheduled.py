"""The gang is scheduled: minMember members bound and not failed.

Reason: ``GangScheduled`` (Normal), facts ``bound`` (members bound whose pod has not failed) and
``min_member``; said again only when those facts change. No timer.

A member that failed (phase ``Failed``) keeps its ``spec.nodeName`` but holds no place of the
gang any more: counted as bound, a Job whose pods fail and are recreated would be told
``GangScheduled`` again for every replacement (3 times for a gang of 2 in the recorded case
``job-pods-fail-and-are-recreated``), with a count above the gang's size. Its loss is told by
``rules.lost``; a member that ``Succeeded`` still counts (a finished member, as there).

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from typing import Any

from ..settings import Output
from ..state import GangState
from .base import Decision, Reason, Rule, Step, emit


def _message(gang: str, f: dict[str, Any]) -> str:
    return f"gang {gang} is scheduled: {f['bound']} of minMember {f['min_member']} pods bound"


SCHEDULED: Reason = Reason("GangScheduled", "Normal", _message)


def decide_scheduled(state: GangState, s: Step, out: list[Output]) -> GangState:
    """``GangScheduled`` at ``s.at`` (microseconds of event time) when minMember members (at
    least one) are bound and not failed, said again only when its facts (``bound``,
    ``min_member``) change; marks the gang ``ever_scheduled``."""
    at = s.at
    spec = state.spec
    if spec is None or not state.members:
        return state
    bound = state.bound
    if bound < spec.min_member or bound == 0:
        return state
    bound -= state.failed_bound  # a counter (GangState.n_failed_bound): O(1) per record
    if bound < spec.min_member or bound == 0:
        return state
    state = emit(state, SCHEDULED.name, SCHEDULED,
                  {"bound": bound, "min_member": spec.min_member}, at, out)
    state.ever_scheduled = True
    return state


DECISION: Decision = Decision("scheduled", decide_scheduled)
RULE: Rule = Rule("scheduled", (SCHEDULED,), (), (DECISION,))
