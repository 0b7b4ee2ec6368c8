"""Explanations: what holds a gang now, and why one of its pods is pending.

Where it sits: the functional core, read side. The worker's HTTP views, ``gangstate describe
gang`` and ``gangstate explain pod`` (against a worker or ``--from TRACE``) call these pure
functions on a ``GangState``; they derive everything from the state, so an explanation needs no
stored diagnostics. Must not: read the clock or do I/O.
"""

from __future__ import annotations

from typing import Any

from . import rules
from . import episode as episodes
from . import preemption as preemptions
from . import lost as losses
from .records import FAILED_STATUSES
from .rules import hold as holds
from .rules import preemption as preemption_rules
from .rules import unschedulable as unschedulables
from .rules.base import skips_gang_checks
from .settings import QUIET_SECONDS
from .state import GangState, Member, summary
from .timefmt import format_time


def unschedulable(state: GangState) -> dict[str, Any] | None:
    """The gang's open failure episode as a finding (``GangUnschedulable``), or ``None``: the
    facts of its diagnostic (``unschedulable_facts``, ``since`` as RFC 3339) with the
    live figures ``rounds``, ``attempts_per_minute`` (``episode.per_minute`` at the gang's
    clock) and ``last_failed_at``. Open means: a member named as not fitting, the last failure
    at most ``settings.QUIET_SECONDS`` before the gang's clock, the gang not scheduled, and no
    preemption for it in progress (``preemption_finding`` then). The same for every member of
    the gang."""
    facts = unschedulables.unschedulable_facts(state)
    ep = state.episode
    if facts is None or ep is None \
            or not episodes.is_open(ep, state.clock, int(QUIET_SECONDS * 1_000_000)) \
            or preemptions.in_progress(state.preemption):
        return None
    shown = {**facts, "since": format_time(ep.since), "rounds": ep.rounds,
             "attempts_per_minute": episodes.per_minute(state.storm, state.clock),
             "last_failed_at": format_time(ep.last_at)}
    return {"reason": "GangUnschedulable", "type": "Warning",
            "message": rules.message(state.gang, "GangUnschedulable", facts), "facts": shown,
            "since": shown["since"]}


def preemption_finding(state: GangState) -> dict[str, Any] | None:
    """The preemption for the gang as a finding: ``GangPreempting`` while it is in progress
    (victims terminating: who, on which nodes, for which member, since when, their grace
    period, the members' nominated nodes; ``rules.preemption.finding``),
    ``GangPreemptionWasted`` once told (``rules.preemption.warn_preemption``), else ``None``."""
    p = state.preemption
    spec = state.spec
    if p is None or not state.members \
            or (spec is not None and state.bound >= max(spec.min_member, 1)):
        return None
    found = preemption_rules.finding(p, state.gang, spec.min_member if spec else None)
    if found is not None:
        return found
    if p.wasted_at is not None and state.episode is not None:
        facts = preemptions.wasted_facts(p, state.episode, spec.min_member if spec else None,
                                         state.bound)
        return {"reason": preemption_rules.WASTED.name, "type": "Warning",
                "message": preemption_rules.wasted_message(state.gang, facts), "facts": facts,
                "since": format_time(p.wasted_at)}
    return None


def findings(state: GangState) -> list[dict[str, Any]]:
    """The conditions that hold for the gang now, as ``{"reason", "type", "message", "facts"}``
    (plus ``"since"`` for a PreEnqueue hold and a failure episode): the hold
    (``GangNotInitialized``, ``GangMembersInsufficient``, ``GangGroupIncomplete``,
    ``GangMemberGated``), silent fallbacks (``GangSpecInvalid``), disagreements
    (``GangSpecConflict``), the open failure episode (``GangUnschedulable``, ``unschedulable``),
    ``GangPreempting``/``GangPreemptionWasted`` (``preemption_finding``), ``GangScheduled``
    (or, once told, ``GangMembersLost``: members lost since the gang was scheduled leave it
    short, ``streams.core.lost``) and ``GangMembersStranded``; then what the families that
    declare findings find (``rules.FINDINGS``: ``GangTopologyUnavailable``)."""
    out: list[dict[str, Any]] = []

    def add(reason: str, facts: dict[str, Any], **extra: Any) -> None:
        out.append({"reason": reason, "type": "Normal" if reason == "GangScheduled" else "Warning",
                    "message": rules.message(state.gang, reason, facts), "facts": facts,
                    **extra})

    held = holds.hold(state)
    if held is not None:
        since = state.hold.held_since
        add(held[0], held[1], since=None if since is None else format_time(since))
    for fb in state.fallbacks:
        add("GangSpecInvalid", {"field": fb.field, "value": fb.value, "effective": fb.effective})
    for field, values in rules.spec.spec_conflicts(state).items():
        add("GangSpecConflict", {"field": field, "values": values})
    spec = state.spec
    scheduled = spec is not None and state.members and state.bound >= spec.min_member
    preempted = preemption_finding(state)
    if preempted is not None:
        out.append(preempted)
    episode = unschedulable(state)
    if episode is not None:
        out.append(episode)
    lost = losses.lost_facts(state) if rules.lost.LOST_KEY in state.emitted else None
    if lost is not None:
        add("GangMembersLost", lost, since=format_time(max(t for _, _, t in state.lost.entries)))
    elif scheduled and spec is not None:
        add("GangScheduled", {"bound": state.bound, "min_member": spec.min_member})
    stranded = stranded_finding(state)
    if stranded is not None:
        out.append(stranded)
    for family_findings in rules.FINDINGS:
        out.extend(family_findings(state))
    return out


def stranded_finding(state: GangState) -> dict[str, Any] | None:
    """``GangMembersStranded`` as a finding once it was told (``rules.stranded.warn_stranded``) and
    while some of its members are still refused and pending: facts ``stranded`` (names) and
    ``after_seconds`` (whole seconds of event time since the hold ended, at the gang's
    clock)."""
    if not state.hold.stranded_told:
        return None
    facts = rules.stranded.stranded_facts(state, state.clock)
    released_at = state.hold.released_at
    if facts is None or released_at is None:
        return None
    return {"reason": "GangMembersStranded", "type": "Warning",
            "message": rules.message(state.gang, "GangMembersStranded", facts), "facts": facts,
            "since": format_time(released_at)}


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


def _unblock_gates(state: GangState, gated: dict[str, list[str]], missing: int) -> str:
    """Which scheduling gates to remove: those of the one gated pod, of all of them, or of at
    least ``missing`` of them; e.g. ``remove the scheduling gates of sc-gated/g-1, set by the
    controller that owns them (g-1 waits for example.com/quota)``."""
    ns = state.namespace
    if len(gated) == 1:
        who = f"{ns}/{next(iter(gated))}"
    elif missing >= len(gated):
        who = f"all {len(gated)} gated pods"
    else:
        who = f"at least {missing} of the {len(gated)} gated pods"
    return (f"remove the scheduling gates of {who}, set by the controller that owns them "
            f"({holds.gated_text(gated)})")


def _unblock(state: GangState, reason: str, facts: dict[str, Any]) -> str:
    gang = state.gang
    if reason == "GangNotInitialized":
        pg = state.podgroup
        if any(m.waits_for_podgroup for m in state.members.values()) and pg is None:
            return (f"create PodGroup {gang} (scheduling.sigs.k8s.io/v1alpha1) with "
                    f"spec.minMember, or remove the pod-group.scheduling.sigs.k8s.io label and "
                    f"set the gang.scheduling.koordinator.sh/min-available annotation")
        return ("set a valid gang.scheduling.koordinator.sh/min-available annotation "
                "(a base-10 integer) on the gang's pods, or create its PodGroup")
    if reason == "GangMembersInsufficient":
        missing = facts["min_member"] - facts["members"]
        return (f"create {missing} more pod{'s' if missing != 1 else ''} of gang {gang}, "
                f"or lower min-available to {facts['members']}")
    if reason == "GangGroupIncomplete":
        blocking = facts["blocking_gang"]
        if "min_member" in facts:
            missing = facts["min_member"] - facts["members"]
            return (f"create {missing} more pod{'s' if missing != 1 else ''} of gang "
                    f"{blocking}, or remove it from the groups annotation")
        if facts["members"]:
            return f"give gang {blocking} a spec (PodGroup or min-available)"
        return f"create the pods of gang {blocking}, or remove it from the groups annotation"
    if reason == "GangMemberGated":
        return _unblock_gates(state, facts["gated"], facts["min_member"] - facts["ungated"])
    if reason == "GangUnschedulable":
        return episodes.unblock_text(facts)
    found = rules.REASONS.get(reason)
    if found is not None and found.unblock is not None:
        return found.unblock(state, facts)
    return ""


def _behind_gates(state: GangState, gated: dict[str, list[str]]) -> str:
    """``held_by`` of an ungated member of a gang held by its gated members (``hold``'s
    ``GangMemberGated``): Coscheduling keeps it at PreEnqueue, behind the gated pods, e.g.
    ``Coscheduling, behind the schedulingGates of sc-gated/g-1``."""
    ns = state.namespace
    names = [f"{ns}/{name}" for name in sorted(gated)]
    shown = ", ".join(names[:holds.GATED_NAMES_SHOWN])
    more = len(names) - holds.GATED_NAMES_SHOWN
    return f"Coscheduling, behind the schedulingGates of {shown}" \
        + (f" and {more} more" if more > 0 else "")


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
    """
    found = state.member_by_name(pod)
    result: dict[str, Any] = {"pod": pod, "gang": state.gang, "member": found is not None,
                              "gang_phase": state.phase, "reasons": [], "unblock": []}
    info = summary(state)
    result["gang_summary"] = {k: info[k] for k in ("members", "bound", "waiting", "min_member",
                                                   "representative", "gang_group")}
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
        held = holds.hold(state)
        gated_hold = held is not None and held[0] == "GangMemberGated"
        if member.gated:
            held_at, held_by = "PreEnqueue", f"schedulingGates of {pod}"
            gates = ", ".join(member.gates)
            result["reasons"].append({
                "reason": "SchedulingGated", "facts": {"gates": list(member.gates)},
                "message": (f"the pod has scheduling gates ({gates}): kube-scheduler's "
                            f"SchedulingGates plugin holds it at PreEnqueue until they are "
                            f"removed")})
            if not gated_hold:
                result["unblock"].append(_unblock_gates(state, {member.name: list(member.gates)},
                                                        1))
        if held is not None:
            held_at = "PreEnqueue"
            if gated_hold and not member.gated:
                held_by = _behind_gates(state, held[1]["gated"])
            result["reasons"].append({"reason": held[0], "facts": held[1],
                                      "message": rules.message(state.gang, *held)})
            result["unblock"].append(_unblock(state, *held))
        elif member.gated:
            pass  # its gates hold it at PreEnqueue whatever its last cycle said (a gated pod
            # that NextPod handed out fails to bind and goes back to the queue)
        elif (why := _family_why(state, member)) is not None:
            held_at, held_by = why["held_at"], why["held_by"]
            result["reasons"].extend(why["reasons"])
            result["unblock"].extend(why["unblock"])
        elif (stranded := stranded_finding(state)) is not None \
                and member.name in stranded["facts"]["stranded"]:
            held_at, held_by = "PreEnqueue", "Coscheduling, refused earlier and not retried"
            result["reasons"].append({k: stranded[k] for k in ("reason", "facts", "message")})
            result["unblock"].append(
                f"delete {pod} so that its controller creates it again (or create it again "
                f"yourself): koord-scheduler runs PreEnqueue again only for a pod being created")
        elif skips_gang_checks(state) and member.pending:
            held_at = _explain_on_its_own(state, member, result)
        elif (pre := preemption_finding(state)) is not None \
                and pre["reason"] == preemption_rules.PREEMPTING.name:
            # PR2: kube-scheduler's DefaultPreemption (PostFilter) waits for the victims
            held_at, held_by = "PostFilter", "DefaultPreemption, waiting for its victims"
            result["reasons"].append({k: pre[k] for k in ("reason", "facts", "message")})
            nominated = pre["facts"]["nominated"].get(member.name)
            result["unblock"].append(
                "nothing to do: the gang binds once the preempted pods are gone (their "
                "deletion completes when their kubelet confirms it, within their grace period)"
                + (f"; this pod is nominated to {nominated}" if nominated else ""))
        elif (episode := unschedulable(state)) is not None:
            # koord-scheduler v1.8.0 rejects the whole gang group when one member does not
            # fit (K core/core.go:376-378,336-339): every member is held by the same failure
            held_at, held_by = "Filter", "Coscheduling"
            result["reasons"].append({k: episode[k] for k in ("reason", "facts", "message")})
            if pre is not None:  # GangPreemptionWasted: the evictions did not help
                result["reasons"].append({k: pre[k] for k in ("reason", "facts", "message")})
            result["unblock"].append(_unblock(state, "GangUnschedulable", episode["facts"]))
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
    result["held_at"] = held_at
    result["held_by"] = held_by
    for item in findings(state):
        if item["reason"] in ("GangSpecInvalid", "GangSpecConflict"):
            result["reasons"].append({k: item[k] for k in ("reason", "facts", "message")})
    return result


def _family_why(state: GangState, member: Member) -> dict[str, Any] | None:
    """The first answer of the families' ``why`` (``rules.WHY``) for ``member``."""
    for family_why in rules.WHY:
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


def _explain_on_its_own(state: GangState, member: Member, result: dict[str, Any]
                        ) -> str | None:
    """A pending pod of a gang that skips the gang checks (``rules.base.skips_gang_checks``, rules
    M2 and P4): koord-scheduler v1.8.0 schedules it like a pod of no gang. Returns ``held_at``:
    ``Filter`` when its own last attempt failed, else ``None``."""
    spec = state.spec
    result["reasons"].append({
        "reason": "GangOnceSatisfied", "facts": {"match_policy": spec.match_policy if spec
                                                 else None},
        "message": (f"gang {state.gang} was once satisfied (a member was bound) and its match "
                    f"policy is once-satisfied: koord-scheduler v1.8.0 schedules its later pods "
                    f"one by one, without gang checks")})
    if member.status in FAILED_STATUSES:
        result["reasons"].append({
            "reason": "PodUnschedulable", "facts": {"reason": member.reason},
            "message": f"the pod's own last attempt failed: {member.reason or 'unknown'}"})
        own = member.reason or "its fit error"
        kinds = episodes.placement_kinds(member.reason) if member.reason else set()
        if kinds and "resource" not in kinds:  # no node may take it: capacity does not help
            result["unblock"].append(f"{episodes.placement_advice(kinds)} ({own}); no other "
                                     f"member has to fit with it")
        else:
            result["unblock"].append(f"free capacity for this pod ({own}); no other member "
                                     f"has to fit with it")
        return "Filter"
    return None


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
