"""Members lost after the gang was scheduled (``streams.core.lost``), and their return.

Reasons: ``GangMembersLost`` (Warning) and ``GangMembersRestored`` (Normal), their messages
here (the facts: ``streams.core.lost``). Timer: ``lost`` (a loss settled).

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .. import lost as losses
from ..native import KOORDINATOR, KUBE_SCHEDULER, gang_text, is_native, min_name
from ..settings import FoldSettings, Output
from ..state import NO_LOSS, GangState
from ..text import listing
from ..timefmt import format_time
from .base import Decision, Reason, Rule, Step, TimerRule, diagnostic, emit, plural

NAMES_SHOWN = 3
"""How many lost members a message names (the facts name all)."""


def replacement_text(match_policy: str) -> str:
    """What koord-scheduler v1.8.0 does with a replacement pod, by the gang's match policy
    (the rules in ``streams.core.lost``)."""
    if match_policy == "only-waiting":
        return ("a replacement pod created by its controller must wait at Permit with "
                "minMember members at once (match policy only-waiting counts no bound "
                "member), so fewer replacements than minMember time out")
    if match_policy == "waiting-and-running":
        return ("a replacement pod created by its controller passes Permit with the bound "
                "members (match policy waiting-and-running), so it is scheduled as soon as "
                "it fits")
    return ("a replacement pod created by its controller skips the gang checks because the "
            "gang group was once satisfied, so it is scheduled on its own as soon as it fits, "
            "without waiting for minMember")


def lost_clauses(f: dict[str, Any]) -> str:
    """Who was lost and how, for a message: members lost the same way share a clause (at most
    ``NAMES_SHOWN`` names each), clauses ordered by their first name, e.g. ``g-1 deleted;
    g-2 failed (Evicted)``. Pure."""
    by_cause: dict[str, list[str]] = {}
    for name in sorted(f["lost"]):
        by_cause.setdefault(f["lost"][name], []).append(name)
    return "; ".join(f"{listing(names, NAMES_SHOWN)} {cause}" for cause, names in
                     sorted(by_cause.items(), key=lambda item: item[1][0]))


def lost_message(gang: str, f: dict[str, Any]) -> str:
    """The message of ``GangMembersLost``, e.g. ``gang ns/g lost members after it was
    scheduled: g-1 deleted; 1 member of minMember 2 remains bound; koord-scheduler neither
    evicts the remaining members nor restarts the gang; a replacement pod ...; a pod without a
    controller is created again by no one``. Lost members with the same cause share a
    clause. Pure."""
    clauses = lost_clauses(f)
    n = f["remaining"]
    return (f"gang {gang} lost members after it was scheduled: {clauses}; {n} "
            f"{plural(n, 'member', 'members')} of minMember {f['min_member']} "
            f"{plural(n, 'remains', 'remain')} bound; koord-scheduler neither evicts the "
            f"remaining members nor restarts the gang; {replacement_text(f['match_policy'])}; "
            f"a pod without a controller is created again by no one")


def restored_message(gang: str, f: dict[str, Any]) -> str:
    """The message of ``GangMembersRestored``, e.g. ``gang ns/g has 2 of minMember 2 members
    bound again``. Pure."""
    return (f"{gang_text(gang)} has {f['bound']} of {min_name(gang)} {f['min_member']} "
            f"members bound again")


def below_message(gang: str, f: dict[str, Any]) -> str:
    """The message of ``GangBelowMinCount`` (a native gang, NG8), e.g. ``PodGroup ns/g was
    scheduled and is now below minCount: g-1 deleted; 1 of minCount 2 pods remains bound;
    its PodGroupInitiallyScheduled condition stays True (it never returns to False) ...``.
    Pure."""
    clauses = lost_clauses(f)
    n = f["remaining"]
    missing = max(1, f["min_member"] - n)
    return (f"{gang_text(gang)} was scheduled and is now below minCount: {clauses}; {n} of "
            f"minCount {f['min_member']} {plural(n, 'pod remains', 'pods remain')} bound; its "
            f"PodGroupInitiallyScheduled condition stays True (kube-scheduler never sets it "
            f"back to False), so the PodGroup looks healthy; kube-scheduler neither evicts the "
            f"remaining pods nor restarts the gang; replacement pods created by its controller "
            f"pass PreEnqueue once the live pods reach minCount again ({missing} more "
            f"{plural(missing, 'pod', 'pods')}) and are then scheduled as soon as they fit; a "
            f"pod without a controller is created again by no one")


def lost_unblock(state: GangState, f: dict[str, Any]) -> str:
    """What makes the gang whole again, for ``explain pod`` on a member still running: pods
    in place of the lost ones, e.g. ``create 1 pod of gang ns/g in place of the lost g-1 (its
    controller does, if it has one), so that minMember 2 members run again; or, if the job
    can go on with fewer, lower minMember`` (a native PodGroup's minCount: no lowering).
    Pure."""
    missing = max(1, f["min_member"] - f["remaining"])
    lost = listing(sorted(f["lost"]), NAMES_SHOWN)
    least = min_name(state.gang)
    lower = "" if is_native(state.gang) else f"; or, if the job can go on with fewer, lower {least}"
    n = len(f["lost"])
    return (f"create {missing} {plural(missing, 'pod', 'pods')} of {gang_text(state.gang)} in "
            f"place of the lost {lost} ({plural(n, 'its', 'their')} controller does, if "
            f"{plural(n, 'it has', 'they have')} one), so that {least} {f['min_member']} "
            f"members run again{lower}")


LOST: Reason = Reason("GangMembersLost", "Warning", lost_message, lost_unblock)
BELOW_MIN_COUNT: Reason = Reason("GangBelowMinCount", "Warning", below_message, lost_unblock)
"""A native gang's loss (NG8): kube-scheduler's PodGroup says it was scheduled whatever it
lost, so the loss is a reason of its own."""
RESTORED: Reason = Reason("GangMembersRestored", "Normal", restored_message)
LOST_KEY = "GangMembersLost"
"""The ``emitted`` key of ``GangMembersLost``: present while a loss told has not ended (its
end is ``GangMembersRestored``, or the gang going away)."""


def lost_reason(gang: str) -> Reason:
    """The reason of a loss told: ``GangBelowMinCount`` for a native gang, else
    ``GangMembersLost``."""
    return BELOW_MIN_COUNT if is_native(gang) else LOST


def told_facts(state: GangState) -> dict[str, Any] | None:
    """``lost.lost_facts`` while a loss told (``GangMembersLost`` under ``LOST_KEY``) has not
    ended, else ``None``."""
    return losses.lost_facts(state) if LOST_KEY in state.emitted else None


def finding(state: GangState) -> list[dict[str, Any]]:
    """``GangMembersLost`` as a finding of ``describe gang`` while a loss told has not ended
    (``told_facts``), ``since`` the latest loss (RFC 3339); else ``[]``."""
    facts = told_facts(state)
    if facts is None:
        return []
    reason = lost_reason(state.gang)
    return [{"reason": reason.name, "type": reason.type,
             "message": reason.message(state.gang, facts),
             "facts": facts, "since": format_time(max(t for _, _, t in state.lost.entries))}]


def warn_lost(state: GangState, at: int) -> tuple[GangState, list[dict[str, Any]]]:
    """Emit ``GangMembersLost`` at event time ``at`` (its settling timer, ``lost.lost_due``,
    or a record at or after it) with ``lost.lost_facts``; marks the losses as told."""
    out: list[dict[str, Any]] = []
    facts = losses.lost_facts(state)
    state.lost = replace(state.lost, told=True)
    if facts is not None:
        state = emit(state, LOST_KEY, lost_reason(state.gang), facts, at, out)
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
RULE: Rule = Rule("lost", (LOST, RESTORED, BELOW_MIN_COUNT), (TIMER,), (DECISION,), finding,
                  schedulers=(KOORDINATOR, KUBE_SCHEDULER))
