"""Preemption for the gang (rules PR1-PR5, ``streams.core.preemption``): victims terminating for
its members, and a preemption that freed room the gang cannot use.

Reasons: ``GangPreempting`` (Normal) and ``GangPreemptionWasted`` (Warning), their messages
here (the facts: ``streams.core.preemption``). Timer: ``preemption`` (the earlier of the two
due times).

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from typing import Any

from .. import episode as episodes
from .. import preemption as preemptions
from ..capacity import cannot_fit, format_quantity
from ..native import KOORDINATOR, KUBE_SCHEDULER, gang_text, min_name, scheduler_of
from ..settings import FoldSettings, Output
from ..state import GangState, Member
from ..text import listing
from ..timefmt import format_time
from .base import (Decision, Reason, Rule, Step, TimerRule, diagnostic, facts_digest,
                   listed, reason_of, skips_gang_checks)

NAMES_SHOWN = 3
"""How many victims a message names (the facts name all)."""


def _victims_text(victims: list[dict[str, Any]], grace: bool) -> str:
    parts = []
    for v in victims:
        extra = ""
        if grace:
            extra = ", grace period not known" if v["grace_seconds"] is None \
                else f", grace period {v['grace_seconds']}s"
        parts.append(f"{v['pod']} on {v['node']} (for {v['for']}, at {v['preempted_at']}{extra})")
    return listing(parts, NAMES_SHOWN)


def preempting_message(gang: str, facts: dict[str, Any]) -> str:
    """The message of ``GangPreempting``, e.g. ``gang ns/g is waiting for its preemption:
    koord-scheduler preempted ns/v-0 on node-a (for g-0, at 2026-12-01T10:00:00.000000Z, grace
    period 30s) for its members; the gang binds once the victim is gone (its deletion completes
    when its kubelet confirms it, within its grace period); nominated nodes: g-0 on node-a;
    until then its pods' FailedScheduling (preemption: not eligible due to a terminating pod on
    the nominated node) is expected: no capacity needs to be freed and minMember need not
    change``. Pure."""
    victims = facts["victims"]
    n = len(victims)
    who = "the victim is" if n == 1 else f"the {n} victims are"
    whose = "its deletion completes when its kubelet confirms it, within its grace period" \
        if n == 1 else "each deletion completes when the victim's kubelet confirms it, " \
                       "within its grace period"
    nominated = facts.get("nominated") or {}
    nominated_text = ", ".join(f"{m} on {node}" for m, node in sorted(nominated.items())) \
        or "none known"
    return (f"{gang_text(gang)} is waiting for its preemption: {scheduler_of(gang)} preempted "
            f"{_victims_text(victims, True)} for its members; the gang binds once {who} gone "
            f"({whose}); nominated nodes: {nominated_text}; until then its pods' "
            f"FailedScheduling (preemption: not eligible due to a terminating pod on the "
            f"nominated node) is expected: no capacity needs to be freed and {min_name(gang)} "
            f"need not change")


def wasted_message(gang: str, facts: dict[str, Any]) -> str:
    """The message of ``GangPreemptionWasted``, e.g. ``gang ns/g still cannot be scheduled
    although koord-scheduler preempted ns/v-0 on node-a (for g-0, at T) and ns/v-1 on node-b
    (for g-1, at T) for it: it needs 3 x 1 nvidia.com/gpu and the cluster has 2 allocatable on
    2 nodes; the evictions freed room the gang cannot use (koord-scheduler preempts for one pod
    at a time, not for the whole gang)``; the scheduler named is the gang's (``scheduler_of``:
    kube-scheduler for a native gang). Pure."""
    victims = facts["victims"]
    min_member, bound, fit = facts["min_member"], facts["bound"], facts["fit"]
    short = facts.get("shortfall")
    if short is not None and min_member is not None:
        def q(milli: int) -> str:
            return format_quantity(short["resource"], milli)

        needed = max(0, min_member - bound)
        needs = (f"it needs {needed} x {q(short['request'])} {short['resource']} and the "
                 f"cluster has {q(short['allocatable'])} allocatable on {short['nodes']} "
                 f"{'node' if short['nodes'] == 1 else 'nodes'}")
    elif fit:
        needs = f"at most {fit} of {min_name(gang)} {min_member} members fit at once"
    else:
        needs = f"none of {min_name(gang)} {min_member} members fit"
    them = "the eviction" if len(victims) == 1 else "the evictions"
    scheduler = scheduler_of(gang)
    return (f"{gang_text(gang)} still cannot be scheduled although {scheduler} preempted "
            f"{_victims_text(victims, False)} for it: {needs}; {them} freed room the gang "
            f"cannot use ({scheduler} preempts for one pod at a time, not for the whole gang)")


PREEMPTING: Reason = Reason("GangPreempting", "Normal", preempting_message)
"""A preemption under way: the gang waits for its victims to terminate."""
WASTED: Reason = Reason("GangPreemptionWasted", "Warning", wasted_message)
"""A preemption that freed room the gang cannot use."""


def preempting_finding(p: preemptions.Preemption | None, gang: str,
                       min_member: int | None) -> dict[str, Any] | None:
    """The preemption as ``explain``/``describe`` tell it: ``GangPreempting`` (facts with
    ``nominated``) while in progress (``preemption.in_progress``), else ``None``. Pure."""
    if p is None or not preemptions.in_progress(p):
        return None
    facts = preemptions.preempting_facts(p, min_member)
    if facts is None:  # only the scheduler's messages say so (the Preempted Events are late)
        facts = {"victims": [], "min_member": min_member}
    facts = {**facts, "nominated": dict(p.nominated)}
    if facts["victims"]:
        message = preempting_message(gang, facts)
    else:
        message = (f"{gang_text(gang)} is waiting for its preemption: the scheduler says a pod "
                   f"preempted for it is still terminating on its nominated node (no Preempted "
                   f"Event seen yet); no capacity needs to be freed and {min_name(gang)} need "
                   f"not change")
    return {"reason": PREEMPTING.name, "type": "Normal", "message": message, "facts": facts,
            "since": facts["victims"][0]["preempted_at"] if facts["victims"]
            else (None if p.clause_at is None else format_time(p.clause_at))}


def preemption_finding(state: GangState) -> dict[str, Any] | None:
    """The preemption for the gang as a finding: ``GangPreempting`` while it is in progress
    (victims terminating: who, on which nodes, for which member, since when, their grace
    period, the members' nominated nodes; ``preempting_finding``), ``GangPreemptionWasted``
    once told (``warn_preemption``), else ``None``; ``None`` too for a gang without members or
    with minMember members (at least one) bound."""
    p = state.preemption
    spec = state.spec
    if p is None or not state.members \
            or (spec is not None and state.bound >= max(spec.min_member, 1)):
        return None
    found = None if futile(state) else \
        preempting_finding(p, state.gang, spec.min_member if spec else None)
    if found is not None:
        return found
    if p.wasted_at is not None and state.episode is not None:
        facts = preemptions.wasted_facts(p, state.episode, spec.min_member if spec else None,
                                         state.bound)
        return {"reason": WASTED.name, "type": "Warning",
                "message": wasted_message(state.gang, facts), "facts": facts,
                "since": format_time(p.wasted_at)}
    return None


def finding(state: GangState) -> list[dict[str, Any]]:
    """``preemption_finding`` as the family's findings of ``describe gang`` (``[]`` or one)."""
    return listed(preemption_finding(state))


def why(state: GangState, member: Member) -> dict[str, Any] | None:
    """Why ``member`` is held while its gang's preemption is in progress (``GangPreempting``,
    rule PR2): kube-scheduler's DefaultPreemption (PostFilter) waits for the victims; the
    unblock names the node the member is nominated to, when known. ``None`` otherwise (a
    ``GangPreemptionWasted`` is told with the failure episode: ``rules.unschedulable.why``)."""
    pre = preemption_finding(state)
    if pre is None or pre["reason"] != PREEMPTING.name:
        return None
    nominated = pre["facts"]["nominated"].get(member.name)
    return {"held_at": "PostFilter", "held_by": "DefaultPreemption, waiting for its victims",
            "reasons": [reason_of(pre)],
            "unblock": [
                "nothing to do: the gang binds once the preempted pods are gone (their "
                "deletion completes when their kubelet confirms it, within their grace period)"
                + (f"; this pod is nominated to {nominated}" if nominated else "")]}


def preemption_live(state: GangState) -> bool:
    """True when a preemption may be told: the gang has members, is not scheduled and does
    not skip the gang checks."""
    spec = state.spec
    return state.preemption is not None and bool(state.members) \
        and not skips_gang_checks(state) \
        and not (spec is not None and state.bound >= max(spec.min_member, 1))


def futile(state: GangState) -> bool:
    """Rule PR8: the gang's failure episode proves it cannot fit even once preemption evicted
    every pod it may (``capacity.cannot_fit``, rule PR4, over the episode's ``shortfall``), so
    its preemption cannot make it bind: no ``GangPreempting`` ("the gang binds once the
    victims are gone" would be false; seen by a new user: 3 x 1 GPU at high priority on 2 GPUs
    held by low-priority pods), no ``GangAwaitingRetry``, and its ``GangUnschedulable`` is not
    held back while the victims terminate (``unschedulable_after``); the waste is told once
    they are gone (PR6)."""
    ep, spec = state.episode, state.spec
    if ep is None or spec is None:
        return False
    short = episodes.shortfall_of(episodes.episode_facts(ep, spec.min_member, state.bound))
    return short is not None and cannot_fit(short)


def unschedulable_after(state: GangState) -> int | None:
    """``preemption.unschedulable_after`` of the gang's preemption, ``None`` (no say) for a
    futile one (``futile``): not before when ``GangUnschedulable`` may be told."""
    return None if futile(state) else preemptions.unschedulable_after(state.preemption)


def _preempting_facts(state: GangState) -> dict[str, Any] | None:
    spec = state.spec
    return preemptions.preempting_facts(state.preemption, spec.min_member if spec else None)


def preemption_due(state: GangState) -> int | None:
    """When ``GangPreempting`` or ``GangPreemptionWasted`` is due (``preemption.
    preempting_due``, ``preemption.wasted_due``), the earlier; ``None`` when neither is."""
    if not preemption_live(state):
        return None
    preempting = None if futile(state) else preemptions.preempting_due(state.preemption)
    due = [d for d in (preempting, preemptions.wasted_due(state.preemption, state.episode))
           if d is not None]
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
    if p is None or not preemption_live(state):
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
    if facts is not None and due is not None and due <= at and not futile(state):
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
RULE: Rule = Rule("preemption", (PREEMPTING, WASTED), (TIMER,), (DECISION,), finding, why,
                  (KOORDINATOR, KUBE_SCHEDULER))
