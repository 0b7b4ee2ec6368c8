"""Explanations: what holds a gang now, and why one of its pods is pending.

Where it sits: the functional core, read side. The worker's HTTP views, ``gangstate describe
gang`` and ``gangstate explain pod`` (against a worker or ``--from TRACE``) call these pure
functions on a ``GangState``; they derive everything from the state, so an explanation needs no
stored diagnostics. Must not: read the clock or do I/O.
"""

from __future__ import annotations

from typing import Any

from . import rules
from .rules import hold as holds
from .rules.base import reason_of
from .state import GangState, Member, summary
from .timefmt import format_time


def findings(state: GangState) -> list[dict[str, Any]]:
    """The conditions that hold for the gang now, as ``{"reason", "type", "message", "facts"}``
    (plus ``"since"`` where the condition has a start): what each family finds
    (``Rule.findings``) of the families that run for its scheduler, in ``rules.FINDINGS`` order: the hold (``GangNotInitialized``,
    ``GangMembersInsufficient``, ``GangGroupIncomplete``, ``GangMemberGated``), silent
    fallbacks (``GangSpecInvalid``), disagreements (``GangSpecConflict``),
    ``GangPreempting``/``GangPreemptionWasted``, the open failure episode
    (``GangUnschedulable``), ``GangScheduled`` (or, once told, ``GangMembersLost``: members
    lost since the gang was scheduled leave it short, ``streams.core.lost``),
    ``GangMembersStranded`` and ``GangTopologyUnavailable``."""
    out: list[dict[str, Any]] = []
    for family_findings in rules.FINDINGS_FOR[state.scheduler]:
        out.extend(family_findings(state))
    return out


def deletion(state: GangState) -> str | None:
    """Why the gang is ``Deleted``, for people (``None`` while it exists): when (RFC 3339), and
    which deletion removed it, as Koordinator removes it (``fold.gang_deleted``), e.g.
    ``2026-11-02T09:10:05.000000Z: its last pod, nlp/gpt-distill-1, was deleted (...)``."""
    if state.deleted_at is None:
        return None
    when = format_time(state.deleted_at)
    kind, _, name = (state.deleted_by or "").partition("/")
    ns = state.namespace
    if kind == "PodGroup":
        return (f"{when}: its PodGroup {ns}/{name} was deleted and no pod of the gang is left; "
                f"a new PodGroup or pod of the gang starts it again")
    return (f"{when}: its last pod, {ns}/{name}, was deleted (a gang without a PodGroup ends "
            f"with its last pod); a new pod of the gang starts it again")


def why_pod(state: GangState, pod: str) -> dict[str, Any]:
    """Why pod ``ns/name`` of this gang is pending: ``{"pod", "gang", "member", "phase",
    "node", "last_cycle", "gang_phase", "held_at", "held_by", "reasons": [{reason, message,
    facts}], "unblock": [str]}``. ``held_at`` is ``PreEnqueue`` when the pod's scheduling gates
    or the gang's hold (``rules.hold.hold``) keep it there, ``Permit`` when it waits for the rest of
    the gang, ``Filter`` when its last cycle failed or its gang has an open failure episode
    (then every member gets the same answer: the episode's ``GangUnschedulable``, held by
    ``Coscheduling``, whatever the pod's own last Event said), or ``None``. ``held_by`` says
    which plugin
    holds it where that is known: ``schedulingGates of ns/name`` for a pod with scheduling
    gates (kube-scheduler's SchedulingGates PreEnqueue plugin), ``Coscheduling, behind the
    schedulingGates of ...`` for the other members of a gang held by gated members; else
    ``None``. A pod with gates also gets the reason ``SchedulingGated`` (facts ``gates``).
    Raises nothing; a pod that is not a live member has ``member`` false.

    For a member not bound to a node, the answer is the first of the families'
    (``Rule.why``, in ``rules.WHY`` order; a member with scheduling gates is asked only the
    hold's, ``rules.hold.why``); without one, the wait at Permit (``WaitingAtPermit``), the
    stage of its own failed attempt, or the scheduling queue (``_explain_queue``). Every pod
    also gets the spec's warnings (``rules.spec.finding``), and a bound member the gang's lost
    members while that loss is told (``rules.lost.finding``: ``GangMembersLost``).
    """
    found = state.member_by_name(pod)
    result: dict[str, Any] = {"pod": pod, "gang": state.gang, "member": found is not None,
                              "gang_phase": state.phase, "reasons": [], "unblock": []}
    info = summary(state)
    result["gang_summary"] = {**{k: info[k] for k in ("members", "bound", "waiting",
                                                      "min_member", "representative",
                                                      "gang_group")},
                              "shim_reports": state.shim_at is not None}
    if found is None:
        result.update(phase=None, node=None, last_cycle=None, held_at=None, held_by=None)
        orphan = state.orphan_by_name(pod)
        if orphan is not None:
            _explain_orphan(state, orphan[1], result)
        return result
    _, member = found
    result.update(phase=member.phase, node=member.node,
                  last_cycle=None if member.status is None else {
                      "cycle": member.cycle, "stage": member.stage, "status": member.status,
                      "reason": member.reason})
    held_at = held_by = None
    if member.node is None:
        answer: dict[str, Any] | None
        if member.gated:
            # its gates hold it at PreEnqueue whatever its last cycle said (a gated pod that
            # NextPod handed out fails to bind and goes back to the queue); the gang's hold,
            # if any, is told too
            held_at, held_by = "PreEnqueue", f"schedulingGates of {pod}"
            gates = ", ".join(member.gates)
            result["reasons"].append({
                "reason": "SchedulingGated", "facts": {"gates": list(member.gates)},
                "message": (f"the pod has scheduling gates ({gates}): kube-scheduler's "
                            f"SchedulingGates plugin holds it at PreEnqueue until they are "
                            f"removed")})
            answer = holds.why(state, member)
            if answer is None or answer["reasons"][0]["reason"] != holds.GATED.name:
                result["unblock"].append(
                    holds.unblock_gates(state, {member.name: list(member.gates)}, 1))
            if answer is not None:
                result["reasons"].extend(answer["reasons"])
                result["unblock"].extend(answer["unblock"])
        elif (answer := _family_why(state, member)) is not None:
            held_at, held_by = answer["held_at"], answer["held_by"]
            result["reasons"].extend(answer["reasons"])
            result["unblock"].extend(answer["unblock"])
        elif member.status == "Wait":
            held_at = "Permit"
            spec = state.spec
            facts: dict[str, Any] = {"waiting": state.waiting,
                                     "min_member": spec.min_member if spec else None,
                                     "waiting_seconds": spec.permit_wait_seconds if spec else None}
            result["reasons"].append({
                "reason": "WaitingAtPermit", "facts": facts,
                "message": (f"the pod fits a node and waits at Permit: {facts['waiting']} of "
                            f"minMember {facts['min_member']} members of gang {state.gang} "
                            f"wait; they bind together once enough members are waiting "
                            f"(match policy {spec.match_policy if spec else 'once-satisfied'}),"
                            f" for at most {facts['waiting_seconds']} s")})
            result["unblock"].append("wait for the other members to be scheduled; nothing "
                                     "is known to block them yet")
        elif member.status in ("Unschedulable", "UnschedulableAndUnresolvable", "Error",
                               "Rejected", "Timeout"):
            # where its cycle ended: Filter for its own failure, the rejecting stage (PostFilter,
            # Permit) when it was released because another member failed or time ran out
            held_at = "Filter" if member.status not in ("Rejected", "Timeout") \
                else (member.stage or "Permit")
        elif member.status is None and member.pending:
            held_at, held_by = _explain_queue(state, pod, result)
    else:
        # a bound member of a gang that lost members: what describe gang says (GangMembersLost
        # or, for a native gang, GangBelowMinCount) is what this pod's job is missing
        for item in rules.lost.finding(state):
            result["reasons"].append(reason_of(item))
            result["unblock"].append(
                rules.lost.lost_reason(state.gang).unblock_text(state, item["facts"]))
    result["held_at"] = held_at
    result["held_by"] = held_by
    result["reasons"].extend(reason_of(item) for item in rules.spec.finding(state))
    return result


def _family_why(state: GangState, member: Member) -> dict[str, Any] | None:
    """The first answer of the families' ``why`` (``rules.WHY``) for ``member``."""
    for family_why in rules.WHY_FOR[state.scheduler]:
        found = family_why(state, member)
        if found is not None:
            return found
    return None


def _explain_orphan(state: GangState, orphan: Member, result: dict[str, Any]) -> None:
    """A pod Koordinator dropped with its gang's PodGroup (rule M5): not a child of any gang
    until its next event. Koordinator v1.8.0 ``pkg/scheduler/plugins/coscheduling/
    core/gang_cache.go:295-310`` (the delete), ``124-149`` (a pod event re-adds it),
    ``core/core.go:202-206`` (``can't find gang`` at PreEnqueue)."""
    result.update(phase=orphan.phase, node=orphan.node, orphan=True)
    if not orphan.pending:
        return
    held = holds.hold(state)
    result["held_at"], result["held_by"] = "PreEnqueue", "Coscheduling"
    if held is not None:
        result["reasons"].append({"reason": held[0], "facts": held[1],
                                  "message": rules.message(state.gang, *held)})
    pg = state.gang.split("/", 1)[1]
    # an update makes the pod a child again (K core/gang_cache.go:177-190) but runs no
    # PreEnqueue (seen on the real scheduler, docs/cluster.md): only a pod created again moves
    if state.podgroup is None:
        result["unblock"].append(
            f"create PodGroup {state.gang} again (scheduling.sigs.k8s.io/v1alpha1, with "
            f"spec.minMember), then delete the gang's pods so that their controller creates "
            f"them again: the scheduler forgot them with the old PodGroup and runs PreEnqueue "
            f"again only for a pod being created")
    else:
        result["unblock"].append(
            f"delete this pod so that its controller creates it again: PodGroup {pg} was "
            f"created again, but the scheduler forgot the pod with the old one and runs "
            f"PreEnqueue again only for a pod being created")


def _explain_queue(state: GangState, pod: str, result: dict[str, Any]
                   ) -> tuple[str | None, str | None]:
    """A pending member the scheduler has not attempted yet, of a gang that passes its checks:
    koord-scheduler v1.8.0 lets one pod per gang group into the scheduling queue, the
    representative (K = ``pkg/scheduler/plugins/coscheduling/``, ``core/core.go:240``,
    ``core/gang.go:572-586``: the others are refused at PreEnqueue with ``representative pod
    %s of gangGroupID %s already exists``, P8); popped, it opens a gang scheduling context and
    NextPod hands out the other members one per cycle (``core/core.go:150-187``); while that
    round runs, a member not handed out yet is refused with ``gangGroup %s is scheduling and
    this pod has not been attempted`` (``core/core.go:228-238``, P7). Neither refusal writes an
    Event; the representative is known only from records that name it (the scheduler shim).
    Returns ``(held_at, held_by)``."""
    rep = state.commands.representative
    group = state.gang_group
    if rep == pod:
        result["reasons"].append({
            "reason": "Representative", "facts": {"gang_group": group},
            "message": (f"the pod is the representative of gang group {group}: the one pod of "
                        f"the group koord-scheduler v1.8.0 keeps in its scheduling queue; when "
                        f"it is popped, a round hands out the other members")})
        return None, None
    if rep is not None:
        behind = state.member_by_name(rep)
        why = "it has not been attempted yet"
        if behind is not None:
            m = behind[1]
            if m.gated:
                why = f"it waits for its scheduling gates ({', '.join(m.gates)})"
            elif m.status is not None:
                why = f"its last attempt ended {m.stage} {m.status}" + \
                    (f" ({m.reason})" if m.reason else "")
        result["reasons"].append({
            "reason": "WaitingForRepresentative", "facts": {"representative": rep,
                                                            "gang_group": group},
            "message": (f"koord-scheduler v1.8.0 lets one pod of gang group {group} into its "
                        f"scheduling queue, the representative {rep}; this pod is refused at "
                        f"PreEnqueue (representative pod {rep} of gangGroupID {group} already "
                        f"exists) until the representative's round hands it out; {why}")})
        result["unblock"].append(f"nothing to do while {rep} moves; if it cannot, see "
                                 f"gangstate explain pod {rep}")
        return "PreEnqueue", f"Coscheduling, behind the representative {rep}"
    result["reasons"].append({
        "reason": "NotYetAttempted", "facts": {"gang_group": group},
        "message": (f"the gang passes its checks and the scheduler has not attempted this pod "
                    f"yet: koord-scheduler v1.8.0 keeps one pod of gang group {group} (its "
                    f"representative) in the scheduling queue and hands the others out one "
                    f"per cycle when that pod is popped; which pod is the representative is "
                    f"not in any Event (the scheduler shim reports it)")})
    return None, None
