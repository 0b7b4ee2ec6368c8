"""The gang is scheduled: minMember members bound and not failed.

Reason: ``GangScheduled`` (Normal), facts ``bound`` (members bound whose pod has not failed) and
``min_member``; said again only when those facts change. No timer.

A member that failed (phase ``Failed``) keeps its ``spec.nodeName`` but holds no place of the
gang any more: counted as bound, a Job whose pods fail and are recreated would be told
``GangScheduled`` again for every replacement (3 times for a gang of 2 in the recorded case
``job-pods-fail-and-are-recreated``), with a count above the gang's size. Its loss is told by
``rules.lost``; a member that ``Succeeded`` still counts (a finished member, as there).

For ``explain pod`` (``why``): once its gang group was satisfied, a gang of match policy
``once-satisfied`` skips every gang check (rules M2, P4) and its later pods are scheduled one by
one, each told by its own attempt (``GangOnceSatisfied``, ``PodUnschedulable``).

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from typing import Any

from .. import episode as episodes
from ..native import KOORDINATOR, KUBE_SCHEDULER, gang_text, min_name
from ..records import FAILED_STATUSES, GANG_CHECK_REASONS
from ..settings import Output
from ..state import GangState, Member
from . import lost
from .base import Decision, Reason, Rule, Step, emit, skips_gang_checks


def _message(gang: str, f: dict[str, Any]) -> str:
    return (f"{gang_text(gang)} is scheduled: {f['bound']} of {min_name(gang)} "
            f"{f['min_member']} pods bound")


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


def finding(state: GangState) -> list[dict[str, Any]]:
    """``GangScheduled`` as a finding of ``describe gang`` (facts ``bound``: every bound member,
    and ``min_member``) while minMember members are bound, unless a loss told has not ended
    (``rules.lost.told_facts``: ``GangMembersLost`` is the finding then); else ``[]``."""
    spec = state.spec
    if spec is None or not state.members or state.bound < spec.min_member \
            or lost.told_facts(state) is not None:
        return []
    facts = {"bound": state.bound, "min_member": spec.min_member}
    return [{"reason": SCHEDULED.name, "type": SCHEDULED.type,
             "message": _message(state.gang, facts), "facts": facts}]


def why(state: GangState, member: Member) -> dict[str, Any] | None:
    """Why pending ``member`` of a gang that skips the gang checks (``base.skips_gang_checks``,
    rules M2 and P4) is not bound: koord-scheduler v1.8.0 schedules it like a pod of no gang
    (reason ``GangOnceSatisfied``; ``WaitingForRetry`` when its last attempt was its gang's
    rejection, from before the group was once satisfied: ``held_at`` ``SchedulingQueue``, rule
    M7; ``PodUnschedulable`` with the unblock for its own fit error when its own last attempt
    failed: ``held_at`` ``Filter``; else ``held_at`` ``None``); ``None`` for any other member
    or gang."""
    if not (skips_gang_checks(state) and member.pending):
        return None
    spec = state.spec
    reasons: list[dict[str, Any]] = [{
        "reason": "GangOnceSatisfied", "facts": {"match_policy": spec.match_policy if spec
                                                 else None},
        "message": (f"gang {state.gang} was once satisfied (a member was bound) and its match "
                    f"policy is once-satisfied: koord-scheduler v1.8.0 schedules its later pods "
                    f"one by one, without gang checks")}]
    answer: dict[str, Any] = {"held_at": None, "held_by": None, "reasons": reasons,
                              "unblock": []}
    if member.reason in GANG_CHECK_REASONS:
        # M7: its last attempt was its gang's (rejected with it) before the group was once
        # satisfied; Coscheduling registers no cluster event (K coscheduling.go:109-112), so
        # kube-scheduler moves such a pod out of its unschedulable pods on another plugin's
        # event, or after DefaultPodMaxInUnschedulablePodsDuration (RETRY_AT_MOST_SECONDS)
        reasons.append({
            "reason": "WaitingForRetry",
            "facts": {"reason": member.reason, "stage": member.stage,
                      "at_most_seconds": RETRY_AT_MOST_SECONDS},
            "message": (f"its last attempt was rejected with its gang ({member.reason} at "
                        f"{member.stage or 'an unknown stage'}) before the gang was once "
                        f"satisfied; kube-scheduler retries it on its own when a cluster event "
                        f"moves it out of its unschedulable pods, or after at most "
                        f"{RETRY_AT_MOST_SECONDS} s there")})
        answer["held_at"] = "SchedulingQueue"
        answer["held_by"] = "kube-scheduler's unschedulable pods"
        answer["unblock"].append(
            "nothing to do for the gang: the pod is retried on its own; if it does not fit "
            "then, its own fit error tells what it needs")
    elif member.status in FAILED_STATUSES:
        reasons.append({
            "reason": "PodUnschedulable", "facts": {"reason": member.reason},
            "message": f"the pod's own last attempt failed: {member.reason or 'unknown'}"})
        own = member.reason or "its fit error"
        kinds = episodes.placement_kinds(member.reason) if member.reason else set()
        if kinds and "resource" not in kinds:  # no node may take it: capacity does not help
            answer["unblock"].append(f"{episodes.placement_advice(kinds)} ({own}); no other "
                                     f"member has to fit with it")
        else:
            answer["unblock"].append(f"free capacity for this pod ({own}); no other member "
                                     f"has to fit with it")
        answer["held_at"] = "Filter"
    return answer


RETRY_AT_MOST_SECONDS = 300
"""kube-scheduler v1.35.2's ``DefaultPodMaxInUnschedulablePodsDuration`` (5 min, KS
``pkg/scheduler/backend/queue/scheduling_queue.go:66``): the longest a pod stays among the
unschedulable pods before it is retried without any cluster event."""


DECISION: Decision = Decision("scheduled", decide_scheduled)
RULE: Rule = Rule("scheduled", (SCHEDULED,), (), (DECISION,), finding, why, (KOORDINATOR, KUBE_SCHEDULER))
