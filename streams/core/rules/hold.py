"""The PreEnqueue hold: why a gang's pending pods are held at PreEnqueue, its warning after the
grace period, its refreshes and its end (rules P2, P4, P6, M5 of docs/koordinator-rules.md).

Reasons: ``GangNotInitialized``, ``GangMembersInsufficient``, ``GangGroupIncomplete``,
``GangMemberGated`` (Warning, the hold), ``GangMembersSatisfied`` and ``GangMembersUngated``
(Normal, its end). Timers: ``grace`` (the hold's grace period ended: its first warning) and
``refresh`` (a warned hold whose facts changed, at most once per ``refresh_seconds``).

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..native import KOORDINATOR, KUBE_SCHEDULER, gang_name, is_native, split_gang
from ..settings import FoldSettings, Output
from ..state import GangState, Member, live_members
from ..timefmt import format_time
from .base import (Decision, Reason, Rule, Step, TimerRule, emit, emit_digests, plural,
                   skips_gang_checks)
from .group import awaiting_answers, peers_to_ask, summary_record

HELD_REASONS = ("GangNotInitialized", "GangMembersInsufficient", "GangGroupIncomplete",
                "GangMemberGated", "GangCompositeIncomplete")
"""The reasons of a PreEnqueue hold (``hold``), e.g. for the held-pods gauge."""


HOLD_KEY = "hold"
"""The ``emitted`` key of the PreEnqueue hold series: its reason may change within one hold
(``GangNotInitialized`` -> ``GangMembersInsufficient``), and each change of facts is news."""


GATED_KEY = "GangMemberGated"
"""The ``emitted`` key under which the hold series also keeps the digest of the last
``GangMemberGated`` it sent (``emit_hold``): while it equals ``emitted[HOLD_KEY]``, the hold's
last word was about scheduling gates, and its end is told by ``GangMembersUngated`` rather
than ``GangMembersSatisfied``."""


_HOLD_SERIES_KEYS = (HOLD_KEY, GATED_KEY, "GangMembersSatisfied", "GangMembersUngated")
"""``emitted`` keys forgotten when a hold ends: the next hold is news again."""


GATED_NAMES_SHOWN = 3
"""How many pods a ``GangMemberGated`` message names per set of gates (the facts name all)."""


def gated_members(state: GangState) -> dict[str, list[str]]:
    """The members the scheduler cannot bind until their scheduling gates are removed
    (``Member.gated``), as ``{pod name: [gate names as written]}`` in arrival order."""
    return {m.name: list(m.gates) for m in state.members.values() if m.gated}


def gated_text(gated: dict[str, list[str]]) -> str:
    """Who waits for which gates, for people: pods with the same gates share a clause,
    clauses ordered by their first pod name (names sorted as strings), at most
    ``GATED_NAMES_SHOWN`` names each, e.g. ``g-1 waits for example.com/quota`` or
    ``p-0, p-1, p-10 and 7 more wait for kueue.x-k8s.io/admission; q-0 waits for a, b``."""
    by_gates: dict[tuple[str, ...], list[str]] = {}
    for name in sorted(gated):
        by_gates.setdefault(tuple(gated[name]), []).append(name)
    clauses = []
    for gates, names in by_gates.items():
        shown = ", ".join(names[:GATED_NAMES_SHOWN])
        more = len(names) - GATED_NAMES_SHOWN
        if more > 0:
            shown += f" and {more} more"
        clauses.append(f"{shown} {plural(len(names), 'waits', 'wait')} for {', '.join(gates)}")
    return "; ".join(clauses)


def _not_initialized_message(gang: str, f: dict[str, Any]) -> str:
    if is_native(gang):
        namespace, name, _ = split_gang(gang)
        return (f"PodGroup {namespace}/{name} (scheduling.k8s.io) does not exist: "
                f"{f['members']} {plural(f['members'], 'pod names', 'pods name')} it in "
                f"spec.schedulingGroup; kube-scheduler keeps "
                f"{plural(f['members'], 'it', 'them')} out of its scheduling queue until it is "
                f"created")
    if f.get("orphaned"):
        return (f"gang {gang} was removed from the scheduler's gang cache with its PodGroup "
                f"{f['podgroup_deleted'] or ''}".rstrip() + f"; its {f['orphaned']} remaining "
                f"{plural(f['orphaned'], 'pod is', 'pods are')} held at PreEnqueue (can't find "
                f"gang) until the PodGroup exists again and each pod is created again")
    return (f"gang {gang} is not initialized: {f['members']} "
            f"{plural(f['members'], 'pod names', 'pods name')} it, but no PodGroup and no valid "
            f"min-available annotation gives its spec; scheduling is held at PreEnqueue")


def _insufficient_message(gang: str, f: dict[str, Any]) -> str:
    missing = f["min_member"] - f["members"]
    if is_native(gang):
        namespace, name, _ = split_gang(gang)
        return (f"PodGroup {namespace}/{name} has {f['members']} of minCount "
                f"{f['min_member']} pods; kube-scheduler holds them at PreEnqueue (waiting "
                f"for minCount pods from a gang to appear in scheduling queue) until "
                f"{missing} more {plural(missing, 'exists', 'exist')}")
    if f.get("orphaned"):
        return (f"gang {gang} has {f['members']} of minMember {f['min_member']} pods as the "
                f"scheduler counts them: {f['orphaned']} "
                f"{plural(f['orphaned'], 'pod was', 'pods were')} dropped from the gang with "
                f"its deleted PodGroup and {plural(f['orphaned'], 'counts', 'count')} again "
                f"only once created again; scheduling is held at PreEnqueue until "
                f"{missing} more {plural(missing, 'counts', 'count')}")
    return (f"gang {gang} has {f['members']} of minMember {f['min_member']} pods; "
            f"scheduling is held at PreEnqueue until {missing} more "
            f"{plural(missing, 'exists', 'exist')}")


def _group_incomplete_message(gang: str, f: dict[str, Any]) -> str:
    blocking = f["blocking_gang"]
    if "min_member" in f:
        state_text = f"has {f['members']} of minMember {f['min_member']} pods"
    elif f["members"]:
        state_text = f"is not initialized ({f['members']} pods, no spec)"
    else:
        state_text = "does not exist (no pods, no PodGroup)"
    return (f"gang {gang} is complete, but gang {blocking} of its gang group "
            f"{f['gang_group']} {state_text}; scheduling is held at PreEnqueue until every "
            f"gang of the group has minMember pods")


def _composite_message(gang: str, f: dict[str, Any]) -> str:
    namespace, name, _ = split_gang(gang)
    composite = f"{namespace}/{f['composite']}"
    if not f.get("exists", True):
        return (f"PodGroup {namespace}/{name} has {f['members']} of minCount "
                f"{f['min_member']} pods, but its parent CompositePodGroup {composite} does "
                f"not exist; kube-scheduler keeps its pods out of its scheduling queue until "
                f"it is created")
    ready, wanted = f["ready_groups"], f["min_group_count"]
    return (f"PodGroup {namespace}/{name} has {f['members']} of minCount {f['min_member']} "
            f"pods, but CompositePodGroup {composite} has {ready} of minGroupCount {wanted} "
            f"child groups with their minCount pods; kube-scheduler holds the whole tree at "
            f"PreEnqueue (waiting for composite pod group \"{f['composite']}\" tree to meet "
            f"quorum) until {wanted - ready} more "
            f"{plural(wanted - ready, 'group has its', 'groups have their')} minCount pods")


def _composite_unblock(state: GangState, f: dict[str, Any]) -> str:
    composite = f"{state.namespace}/{f['composite']}"
    if not f.get("exists", True):
        return (f"create CompositePodGroup {composite} (scheduling.k8s.io/v1alpha3, with the "
                f"Workload its spec.workloadRef names), or delete PodGroup "
                f"{state.namespace}/{state.name} and create it again without "
                f"spec.parentCompositePodGroupName (the field is immutable)")
    missing = f["min_group_count"] - f["ready_groups"]
    text = (f"create the missing pods of {missing} more child "
            f"{plural(missing, 'PodGroup', 'PodGroups')} of CompositePodGroup {composite} "
            f"(gangstate describe gang on each tells how many)")
    if f["ready_groups"] >= 1:  # minGroupCount is at least 1 (API validation)
        text += (f", or lower its spec.schedulingPolicy.gang.minGroupCount to "
                 f"{f['ready_groups']} (kube-scheduler tries the held pods again at its next "
                 f"retry, not at once: it registers no event for that change)")
    return text


def _gated_message(gang: str, f: dict[str, Any]) -> str:
    missing = f["min_member"] - f["ungated"]
    if is_native(gang):
        namespace, name, _ = split_gang(gang)
        gated = len(f["gated"])
        return (f"PodGroup {namespace}/{name} has {f['members']} pods (minCount "
                f"{f['min_member']}), {gated} with scheduling gates ({gated_text(f['gated'])}); "
                f"kube-scheduler queues the PodGroup's pods as one and holds all of them at "
                f"PreEnqueue until the gates of {plural(gated, 'that pod are', 'those pods are')}"
                f" removed (by the controller that set them)")
    return (f"gang {gang} has {f['ungated']} of minMember {f['min_member']} pods free of "
            f"scheduling gates ({gated_text(f['gated'])}); scheduling is held at "
            f"PreEnqueue until the gates of {missing} more {plural(missing, 'pod', 'pods')}"
            f" are removed (by the controller that set them)")


def _satisfied_message(gang: str, f: dict[str, Any]) -> str:
    if is_native(gang):
        namespace, name, _ = split_gang(gang)
        return (f"PodGroup {namespace}/{name} has {f['members']} of minCount "
                f"{f['min_member']} pods; no longer held")
    return (f"gang {gang} has {f['members']} of minMember {f['min_member']} pods; "
            f"no longer held at PreEnqueue")


def _ungated_message(gang: str, f: dict[str, Any]) -> str:
    if is_native(gang):
        namespace, name, _ = split_gang(gang)
        return (f"PodGroup {namespace}/{name} has {f['ungated']} pods, none with scheduling "
                f"gates (minCount {f['min_member']}); no longer held at PreEnqueue")
    return (f"gang {gang} has {f['ungated']} of minMember {f['min_member']} pods free of "
            f"scheduling gates; no longer held at PreEnqueue")


def _more(missing: int) -> str:
    return f"{missing} more pod{'s' if missing != 1 else ''}"


def _not_initialized_unblock(state: GangState, f: dict[str, Any]) -> str:
    if is_native(state.gang):
        return (f"create PodGroup {state.namespace}/{state.name} (scheduling.k8s.io/v1beta1) "
                f"with spec.schedulingPolicy.gang.minCount")
    if any(m.waits_for_podgroup for m in state.members.values()) and state.podgroup is None:
        return (f"create PodGroup {state.gang} (scheduling.sigs.k8s.io/v1alpha1) with "
                f"spec.minMember, or remove the pod-group.scheduling.sigs.k8s.io label and "
                f"set the gang.scheduling.koordinator.sh/min-available annotation")
    return ("set a valid gang.scheduling.koordinator.sh/min-available annotation "
            "(a base-10 integer) on the gang's pods, or create its PodGroup")


def _insufficient_unblock(state: GangState, f: dict[str, Any]) -> str:
    if is_native(state.gang):
        return (f"create {_more(f['min_member'] - f['members'])} naming PodGroup "
                f"{state.namespace}/{state.name} in spec.schedulingGroup, or lower its "
                f"spec.schedulingPolicy.gang.minCount to {f['members']}")
    return (f"create {_more(f['min_member'] - f['members'])} of gang {state.gang}, "
            f"or lower min-available to {f['members']}")


def _group_incomplete_unblock(state: GangState, f: dict[str, Any]) -> str:
    blocking = f["blocking_gang"]
    if "min_member" in f:
        return (f"create {_more(f['min_member'] - f['members'])} of gang "
                f"{blocking}, or remove it from the groups annotation")
    if f["members"]:
        return f"give gang {blocking} a spec (PodGroup or min-available)"
    return f"create the pods of gang {blocking}, or remove it from the groups annotation"


def unblock_gates(state: GangState, gated: dict[str, list[str]], missing: int) -> str:
    """Which scheduling gates to remove: those of the one gated pod (``gated``: ``{pod name:
    [gates]}``), of all of them, or of at least ``missing`` of them; e.g. ``remove the
    scheduling gates of sc-gated/g-1, set by the controller that owns them (g-1 waits for
    example.com/quota)``."""
    ns = state.namespace
    if len(gated) == 1:
        who = f"{ns}/{next(iter(gated))}"
    elif missing >= len(gated):
        who = f"all {len(gated)} gated pods"
    else:
        who = f"at least {missing} of the {len(gated)} gated pods"
    return (f"remove the scheduling gates of {who}, set by the controller that owns them "
            f"({gated_text(gated)})")


def _gated_unblock(state: GangState, f: dict[str, Any]) -> str:
    if is_native(state.gang):  # NG7: every gate, whatever minCount
        return unblock_gates(state, f["gated"], len(f["gated"]))
    return unblock_gates(state, f["gated"], f["min_member"] - f["ungated"])


NOT_INITIALIZED: Reason = Reason("GangNotInitialized", "Warning", _not_initialized_message,
                                 _not_initialized_unblock)
INSUFFICIENT: Reason = Reason("GangMembersInsufficient", "Warning", _insufficient_message,
                              _insufficient_unblock)
GROUP_INCOMPLETE: Reason = Reason("GangGroupIncomplete", "Warning", _group_incomplete_message,
                                  _group_incomplete_unblock)
GATED: Reason = Reason("GangMemberGated", "Warning", _gated_message, _gated_unblock)
COMPOSITE_INCOMPLETE: Reason = Reason("GangCompositeIncomplete", "Warning", _composite_message,
                                      _composite_unblock)
"""NG6: a native PodGroup whose CompositePodGroup tree does not meet its quorum (or does not
exist): kube-scheduler's own words for the situation Koordinator's GangGroupIncomplete tells."""
GROUP_REASONS = ("GangGroupIncomplete", "GangCompositeIncomplete")
"""Hold reasons that depend on other gangs' news: before it warns, the gang asks them for
their state as of the warning's time (``peers_to_ask``)."""
SATISFIED: Reason = Reason("GangMembersSatisfied", "Normal", _satisfied_message)
UNGATED: Reason = Reason("GangMembersUngated", "Normal", _ungated_message)
_HELD = {r.name: r for r in (NOT_INITIALIZED, INSUFFICIENT, GROUP_INCOMPLETE, GATED,
                              COMPOSITE_INCOMPLETE)}


def emit_hold(state: GangState, reason: str, facts: dict[str, Any], at: int,
               out: list[dict[str, Any]]) -> GangState:
    """``emit`` under ``HOLD_KEY`` (``reason`` one of ``HELD_REASONS``); a ``GangMemberGated``
    sent is also remembered under
    ``GATED_KEY`` (so the end of the hold knows which Normal reason tells it)."""
    count = len(out)
    state = emit(state, HOLD_KEY, _HELD[reason], facts, at, out)
    if len(out) > count and reason == "GangMemberGated":
        state.emitted = {**state.emitted, GATED_KEY: state.emitted[HOLD_KEY]}
    return state


def orphans_pending(state: GangState) -> int:
    """How many of the pods dropped with the gang's PodGroup (``GangState.orphans``) are still
    pending (``Member.pending``)."""
    return sum(1 for m in state.orphans.values() if m.pending)


def hold(state: GangState) -> tuple[str, dict[str, Any]] | None:
    """Why the gang's pending pods are held at PreEnqueue, as ``(reason, facts)``, or ``None``.

    Held means: at least one member (or pod dropped with the PodGroup) is pending, and the
    gang is not initialised (``GangNotInitialized`` [members]), has fewer live members than
    minMember (``GangMembersInsufficient`` [members, min_member, total_number]), or another
    gang of its gang group is missing, uninitialised or short (``GangGroupIncomplete``
    [gang_group, blocking_gang, members, min_member when known]; the first such gang in sorted
    order). This is Koordinator's PreEnqueue basic check (``PreEnqueue``,
    ``GangBasicCheckUnsatisfied``; every gang of the group must have min-available members).
    Koordinator v1.8.0 rules (docs/koordinator-rules.md, with their sources):

    - P2/M5: pods dropped with their PodGroup (``GangState.orphans``) are refused with
      ``can't find gang`` while the gang is gone, and counted by no gang when it is created
      again; the facts then add ``orphaned`` (how many) and ``podgroup_deleted`` (its name,
      or ``None``).
    - P4: a gang that skips the gang checks (``skips_gang_checks``) is never held.
    - P6: the gang's own count is checked only when its gang group lists it.

    Otherwise, held means fewer than minMember members are free of scheduling gates
    (``GangMemberGated`` [members, ungated, min_member, gated: {pod name: [gates]}]; bound
    members count as free). Rules G1-G4 of Koordinator v1.8.0 with kube-scheduler v1.35.2
    (docs/koordinator-rules.md, with their sources):

    - G1: a gated pod is a gang child like any other, so the basic check above passes;
    - G2: the ``SchedulingGates`` PreEnqueue plugin refuses it while ``spec.schedulingGates``
      is not empty, and runs first on its next PreEnqueue; on its first one, Coscheduling may
      run before it (the plugins sit in a map) and make the gated pod the gang group's
      representative, which it stays while gated; the other members are then refused with
      ``representative pod ... already exists``;
    - G3: an ungated member refused at PreEnqueue before the gang had minMember children stays
      refused: the gang cache re-activates only the pod being added, here the gated one, and
      neither a cluster event nor the 5-minute flush of unschedulable pods moves it;
    - G4: when a gang round runs anyway, NextPod hands out pending children gated or not, and
      the API server refuses to bind a gated pod: minMember members can only be bound
      together once minMember of them are free of gates.
    """
    if is_native(state.gang):
        return native_hold(state)
    if not state.n_pending and not (state.orphans and orphans_pending(state)):
        return None
    spec = state.spec
    members = len(state.members)
    orphaned: dict[str, Any] = {}
    if state.orphans:
        orphaned = {"orphaned": len(state.orphans),
                    "podgroup_deleted": (state.deleted_by or "").partition("/")[2]
                    if state.deleted_by and state.deleted_by.startswith("PodGroup/")
                    else None}
    if spec is None:
        return "GangNotInitialized", {"members": members, **orphaned}
    if skips_gang_checks(state):
        return None
    if members < spec.min_member and state.gang in spec.groups:
        return "GangMembersInsufficient", {"members": members, "min_member": spec.min_member,
                                           "total_number": spec.total_number, **orphaned}
    for other in spec.groups:
        if other == state.gang:
            continue
        peer = state.group.peers.get(other)
        facts: dict[str, Any] = {"gang_group": spec.gang_group, "blocking_gang": other}
        if peer is None or not peer.exists:
            return "GangGroupIncomplete", {**facts, "members": 0}
        if not peer.initialized or peer.min_member is None:
            return "GangGroupIncomplete", {**facts, "members": peer.members}
        if peer.members < peer.min_member:
            return "GangGroupIncomplete", {**facts, "members": peer.members,
                                           "min_member": peer.min_member}
    gated = state.n_gated
    if gated and members - gated < spec.min_member:
        return "GangMemberGated", {"members": members, "ungated": members - gated,
                                   "min_member": spec.min_member,
                                   "gated": gated_members(state)}
    return None


def native_hold(state: GangState) -> tuple[str, dict[str, Any]] | None:
    """Why a native gang's pending pods are held (kube-scheduler's GangScheduling, rule ids of
    ``docs/native-gang-rules.md``), as ``(reason, facts)``, or ``None``:

    - NG2: the PodGroup does not exist (``GangNotInitialized`` [members, podgroup]): the
      scheduling queue keeps every pod naming it out of scheduling until it does;
    - NG3: a PodGroup without the gang policy (``Basic``) holds nothing;
    - NG4: fewer live pods (not ``Succeeded``/``Failed``; bound or not, gated or not) than
      ``minCount`` (``GangMembersInsufficient`` [members, min_member, total_number]);
    - NG7: a pending member with scheduling gates (``GangMemberGated`` [members, ungated,
      min_member, gated]), however many are free of gates: kube-scheduler queues a PodGroup's
      pods as one entity, and when any of them is gated the whole entity is (the
      ``SchedulingGates`` PreEnqueue plugin on that pod), so none is tried until every gate is
      removed (measured: 30 s without an attempt, Event or condition on the ungated members).
    """
    if not state.n_pending:
        return None
    live = live_members(state)
    spec = state.spec
    if spec is None:
        if state.podgroup is None:
            return "GangNotInitialized", {"members": live, "podgroup": state.name}
        return None
    if live < spec.min_member:
        return "GangMembersInsufficient", {"members": live, "min_member": spec.min_member,
                                           "total_number": spec.total_number}
    if spec.gang_group != state.gang:  # NG6: a child of a CompositePodGroup
        composite = spec.gang_group
        peer = state.group.peers.get(composite)
        facts: dict[str, Any] = {"composite": gang_name(composite), "members": live,
                                 "min_member": spec.min_member}
        if peer is None or not peer.exists:
            return "GangCompositeIncomplete", {**facts, "exists": False}
        if peer.min_member is not None and peer.members < peer.min_member:
            return "GangCompositeIncomplete", {**facts, "ready_groups": peer.members,
                                               "min_group_count": peer.min_member}
    gated = state.n_gated
    if gated:
        return "GangMemberGated", {"members": live, "ungated": live - gated,
                                   "min_member": spec.min_member,
                                   "gated": gated_members(state)}
    return None


def finding(state: GangState) -> list[dict[str, Any]]:
    """The PreEnqueue hold (``hold``) as a finding of ``describe gang``, ``since`` the event
    time it began (RFC 3339; ``None`` before the fold saw it begin); ``[]`` when not held."""
    held = hold(state)
    if held is None:
        return []
    reason, facts = held
    since = state.hold.held_since
    return [{"reason": reason, "type": "Warning",
             "message": _HELD[reason].message(state.gang, facts), "facts": facts,
             "since": None if since is None else format_time(since)}]


def behind_gates(state: GangState, gated: dict[str, list[str]]) -> str:
    """``held_by`` of an ungated member of a gang held by its gated members (``hold``'s
    ``GangMemberGated``, ``gated``: ``{pod name: [gates]}``): Coscheduling keeps it at
    PreEnqueue, behind the gated pods, e.g. ``Coscheduling, behind the schedulingGates of
    sc-gated/g-1``."""
    ns = state.namespace
    names = [f"{ns}/{name}" for name in sorted(gated)]
    shown = ", ".join(names[:GATED_NAMES_SHOWN])
    more = len(names) - GATED_NAMES_SHOWN
    return f"Coscheduling, behind the schedulingGates of {shown}" \
        + (f" and {more} more" if more > 0 else "")


def why(state: GangState, member: Member) -> dict[str, Any] | None:
    """Why ``member`` (not bound to a node) is held by the gang's PreEnqueue hold (``hold``),
    for ``explain pod``: at ``PreEnqueue``; ``held_by`` is ``behind_gates`` for an ungated
    member of a gang held by its gated members, else ``None`` (a gated member is held by its
    own gates: ``explain`` says so); ``None`` when the gang is not held."""
    held = hold(state)
    if held is None:
        return None
    reason, facts = held
    behind = reason == GATED.name and not member.gated
    if is_native(state.gang):
        by: str | None
        if reason == NOT_INITIALIZED.name or (reason == COMPOSITE_INCOMPLETE.name
                                              and not facts.get("exists", True)):
            # NG2, NG6: the queue keeps it until the PodGroup (CompositePodGroup) exists
            where, by = "SchedulingQueue", "kube-scheduler's incomplete pod-group pods"
        elif behind:  # NG7: the pod group is queued as one entity, gated with its gated pods
            where, by = "SchedulingQueue", "the PodGroup, gated as one entity by SchedulingGates"
        else:
            where, by = "PreEnqueue", None if member.gated else "GangScheduling"
        return {"held_at": where, "held_by": by,
                "reasons": [{"reason": reason, "facts": facts,
                             "message": _HELD[reason].message(state.gang, facts)}],
                "unblock": [_HELD[reason].unblock_text(state, facts)]}
    return {"held_at": "PreEnqueue",
            "held_by": behind_gates(state, facts["gated"]) if behind else None,
            "reasons": [{"reason": reason, "facts": facts,
                         "message": _HELD[reason].message(state.gang, facts)}],
            "unblock": [_HELD[reason].unblock_text(state, facts)]}


def _asked(state: GangState, as_of: int | None) -> None:
    """Set the event time the gang asked its peers about (``Group.asked_as_of``; ``None``: it
    waits for no answer), replacing ``state.group`` only when that changes."""
    if state.group.asked_as_of != as_of:
        state.group = replace(state.group, asked_as_of=as_of)


def warn_held(state: GangState, at: int) -> tuple[GangState, list[dict[str, Any]]]:
    """The hold's grace period ended at ``at``: emit its warning and mark the hold as warned;
    or, for a hold by the gang group with peers' news older than ``at``, ask those peers for
    their state as of ``at`` first (``peers_to_ask``)."""
    found = hold(state)
    out: list[dict[str, Any]] = []
    if found is None:
        state.hold = replace(state.hold, held_since=None, warned=False)
        _asked(state, None)
        return state, out
    if found[0] in GROUP_REASONS:
        stale = peers_to_ask(state, at)
        if stale:
            out = [summary_record(state, g, at, wanted_as_of=at) for g in stale]
            _asked(state, at)
            return state, out
    reason, facts = found
    state = emit_hold(state, reason, facts, at, out)
    state.hold = replace(state.hold, warned=True, hold_emitted_at=at)
    _asked(state, None)
    return state, out


def hold_update_pending(state: GangState) -> bool:
    """True when a warned hold's facts changed since its last warning (a refresh is due)."""
    if not state.hold.warned or state.hold.held_since is None:
        return False
    found = hold(state)
    return found is not None and \
        state.emitted.get(HOLD_KEY) != emit_digests(found[0], found[1])[0]


def refresh_hold(state: GangState, at: int) -> tuple[GangState, list[dict[str, Any]]]:
    """The refresh interval of a warned hold ended at ``at``: emit its current facts."""
    out: list[dict[str, Any]] = []
    return decide_hold(state, at, out, 0), out


def decide_hold(state: GangState, at: int, out: list[dict[str, Any]],
                 refresh_micros: int) -> GangState:
    found = hold(state)
    held = state.hold
    if found is not None:
        if held.held_since is None:
            state.hold = replace(held, held_since=at, warned=False)
            return state
        if held.warned:
            if held.hold_emitted_at is not None and at < held.hold_emitted_at + refresh_micros:
                return state  # news within the refresh interval: the refresh timer sends it
            if found[0] in GROUP_REASONS:
                wanted = max(at, state.group.asked_as_of or 0)
                stale = peers_to_ask(state, wanted)
                if stale:  # news of the group first (see peers_to_ask)
                    if state.group.asked_as_of != wanted:
                        out.extend(summary_record(state, g, at, wanted_as_of=wanted)
                                   for g in stale)
                    _asked(state, wanted)
                    return state
            count = len(out)
            state = emit_hold(state, found[0], found[1], at, out)
            if len(out) > count:
                state.hold = replace(state.hold, hold_emitted_at=at)
            _asked(state, None)
            return state
        return state
    if held.held_since is None:
        return state
    spec = state.spec
    members = len(state.members)
    if is_native(state.gang):
        members = live_members(state)
    emitted = state.emitted
    if held.warned and spec is not None and GATED_KEY in emitted \
            and emitted[GATED_KEY] == emitted.get(HOLD_KEY):
        ungated = members - state.n_gated
        if ungated >= spec.min_member:
            state = emit(state, UNGATED.name, UNGATED,
                          {"members": members, "ungated": ungated,
                           "min_member": spec.min_member}, at, out)
    elif held.warned and spec is not None and members >= spec.min_member:
        state = emit(state, SATISFIED.name, SATISFIED,
                      {"members": members, "min_member": spec.min_member}, at, out)
    state.emitted = {k: v for k, v in state.emitted.items() if k not in _HOLD_SERIES_KEYS}
    state.hold = replace(state.hold, held_since=None, warned=False, hold_emitted_at=None)
    _asked(state, None)
    return state


def grace_due(state: GangState, settings: FoldSettings) -> int | None:
    """When the hold's grace period ends (its first warning), or ``None``: none once warned,
    and none while the gang waits for its peers' answers (``awaiting_answers``)."""
    held_since = state.hold.held_since
    if held_since is not None and not state.hold.warned and not awaiting_answers(state):
        return held_since + settings.grace_micros
    return None


def refresh_due(state: GangState, settings: FoldSettings) -> int | None:
    """When a warned hold whose facts changed is told again (``refresh_seconds`` after its
    last warning), or ``None``."""
    emitted_at = state.hold.hold_emitted_at
    if emitted_at is not None and not awaiting_answers(state) and hold_update_pending(state):
        return emitted_at + settings.refresh_micros
    return None


def _fire_grace(state: GangState, due: int, settings: FoldSettings
                ) -> tuple[GangState, list[Output]]:
    return warn_held(state, due)


def _fire_refresh(state: GangState, due: int, settings: FoldSettings
                  ) -> tuple[GangState, list[Output]]:
    state, fired = refresh_hold(state, due)
    if not fired:  # nothing sent (or only questions to the peers): move the timer on
        state.hold = replace(state.hold, hold_emitted_at=due)
    return state, fired


GRACE: TimerRule = TimerRule("grace", "grace period ended", grace_due, _fire_grace,
                             releases_deferred=True)
REFRESH: TimerRule = TimerRule("refresh", "hold refresh interval ended", refresh_due,
                               _fire_refresh)
def _decide(state: GangState, s: Step, out: list[Output]) -> GangState:
    return decide_hold(state, s.at, out, s.settings.refresh_micros)


DECISION: Decision = Decision("hold", _decide)
RULE: Rule = Rule("hold", (NOT_INITIALIZED, INSUFFICIENT, GROUP_INCOMPLETE, GATED, SATISFIED,
                          UNGATED, COMPOSITE_INCOMPLETE), (GRACE, REFRESH), (DECISION,),
                  finding, why,
                  (KOORDINATOR, KUBE_SCHEDULER))
