"""The failure episode: a gang whose members keep failing to fit (``streams.core.episode``).

Reason: ``GangUnschedulable`` (Warning). Timer: ``unschedulable`` (the episode settled, or its
facts changed and ``refresh_seconds`` passed since the last one).

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from typing import Any

from .. import episode as episodes
from .. import preemption as preemptions
from ..native import KOORDINATOR, KUBE_SCHEDULER, is_native, quiet_micros
from ..records import CycleObserved
from ..settings import QUIET_SECONDS, FoldSettings, Output
from ..state import GangState, Member
from ..timefmt import format_time
from . import preemption as preemption_rules
from .base import (Decision, Reason, Rule, Step, TimerRule, diagnostic, facts_digest,
                   listed, reason_of, skips_gang_checks)

def _unblock(state: GangState, facts: dict[str, Any]) -> str:
    return episodes.unblock_text(facts, state.gang)


UNSCHEDULABLE: Reason = Reason("GangUnschedulable", "Warning", episodes.unschedulable_message,
                               _unblock)
UNSCHEDULABLE_KEY = "GangUnschedulable"
"""The ``emitted`` key of a failure episode's diagnostic (digest of ``material`` facts)."""


def unschedulable_facts(state: GangState) -> dict[str, Any] | None:
    """The facts of the gang's failure episode that make its ``GangUnschedulable`` (``episode.
    episode_facts``: ``unfit``, ``fit``, ``min_member``, ``since`` in microseconds), or ``None``
    without an episode naming a member, once the gang is scheduled, while it skips the gang
    checks (``skips_gang_checks``: its pods fail one by one, each with its own Event), or when
    the gang has no pod left: the scheduler's Events of pods already deleted still arrive
    (recorded: ``tests/cases/recorded/gpu-short``, one 2 s after the deletion), and a warning
    about a gang that no longer exists would tell no one anything."""
    ep = state.episode
    if ep is None or not ep.unfit or not state.members or skips_gang_checks(state):
        return None
    spec = state.spec
    if spec is None:
        return None  # no minMember to tell of: a gang not initialised is held at PreEnqueue
    if state.bound >= max(spec.min_member, 1):
        return None
    return episodes.episode_facts(ep, spec.min_member, state.bound)


def unschedulable_due(state: GangState, settings: FoldSettings) -> int | None:
    """When the episode's ``GangUnschedulable`` is due (microseconds of event time): its
    settling time (``since`` + ``episode_settle_seconds``) before the first one, then, when the
    facts differ from those last emitted, ``refresh_seconds`` after the last; else ``None``."""
    facts = unschedulable_facts(state)
    ep = state.episode
    if facts is None or ep is None:
        return None
    after = preemption_rules.unschedulable_after(state)  # PR2: not while it waits
    if after == preemptions.NEVER:
        return None
    if ep.emitted_at is None:
        due = ep.since + settings.settle_micros
    elif state.emitted.get(UNSCHEDULABLE_KEY) == facts_digest(facts):
        return None
    elif episodes.fits_now(facts):
        return None  # news of recovery ("room for 2 now: enough") is no warning to send again
    else:
        due = ep.emitted_at + settings.refresh_micros
    return due if after is None else max(due, after)


def warn_unschedulable(state: GangState, at: int, settings: FoldSettings,
                       ) -> tuple[GangState, list[dict[str, Any]]]:
    """Emit the failure episode's ``GangUnschedulable`` at event time ``at`` (its timer, or a
    record at or after it): facts ``unfit`` (member name -> fit error as written), ``fit``,
    ``min_member``, ``since`` (RFC 3339), and ``rounds`` and ``attempts_per_minute`` as they are
    then (not compared: the diagnostic is not emitted again for them). Assigns the state's
    fields (the fold's own copy) and returns it with the outputs."""
    out: list[dict[str, Any]] = []
    facts = unschedulable_facts(state)
    ep = state.episode
    after = preemption_rules.unschedulable_after(state)
    if facts is None or ep is None or (after is not None and at < after):
        return state, out  # PR2: a gang waiting for its victims is not short of capacity
    digest = facts_digest(facts)
    state.episode = ep._replace(emitted_at=at)
    if state.emitted.get(UNSCHEDULABLE_KEY) == digest:
        return state, out
    shown = {**facts, "since": format_time(ep.since), "rounds": ep.rounds,
             "attempts_per_minute": episodes.per_minute(state.storm, at)}
    out.append(diagnostic(state, UNSCHEDULABLE, shown, at))
    state.emitted = {**state.emitted, UNSCHEDULABLE_KEY: digest}
    return state, out


def decide_unschedulable(state: GangState, s: Step, out: list[Output]) -> GangState:
    """``GangUnschedulable`` when a cycle record (``CycleObserved``; other records change
    nothing here) arrives at or after its due time (``PartitionFold`` fires the timer first;
    this covers a fold stepped record by record)."""
    rec = s.rec
    if not isinstance(rec, CycleObserved):
        return state
    due = unschedulable_due(state, s.settings)
    if due is None or rec.at < due:
        return state
    state, fired = warn_unschedulable(state, rec.at, s.settings)
    out.extend(fired)
    return state


def episode_finding(state: GangState) -> dict[str, Any] | None:
    """The gang's open failure episode as a finding (``GangUnschedulable``), or ``None``: the
    facts of its diagnostic (``unschedulable_facts``, ``since`` as RFC 3339) with the live
    figures ``rounds``, ``attempts_per_minute`` (``episode.per_minute`` at the gang's clock)
    and ``last_failed_at``. Open means: a member named as not fitting, the last failure at
    most ``settings.QUIET_SECONDS`` before the gang's clock (``native.quiet_micros``: longer
    for a native gang, NG10), the gang not scheduled, no preemption for it in progress
    (``rules.preemption.preemption_finding`` then) and the gang tried since its preemption made
    room (``rules.retry`` until then, PR7). The same for
    every member of the gang."""
    facts = unschedulable_facts(state)
    ep = state.episode
    if facts is None or ep is None \
            or not episodes.is_open(ep, state.clock, quiet_micros(
                state.gang, int(QUIET_SECONDS * 1_000_000))) \
            or preemption_rules.unschedulable_after(state) == preemptions.NEVER:
        return None  # a preemption in progress, or no attempt since it made room (PR7)
    shown = {**facts, "since": format_time(ep.since), "rounds": ep.rounds,
             "attempts_per_minute": episodes.per_minute(state.storm, state.clock),
             "last_failed_at": format_time(ep.last_at)}
    return {"reason": UNSCHEDULABLE.name, "type": "Warning",
            "message": UNSCHEDULABLE.message(state.gang, facts), "facts": shown,
            "since": shown["since"]}


def finding(state: GangState) -> list[dict[str, Any]]:
    """``episode_finding`` as the family's findings of ``describe gang`` (``[]`` or one)."""
    return listed(episode_finding(state))


def why(state: GangState, member: Member) -> dict[str, Any] | None:
    """Why ``member`` is held while its gang has an open failure episode (``episode_finding``):
    koord-scheduler v1.8.0 rejects the whole gang group when one member does not fit (K
    core/core.go:376-378,336-339), so every member is held at ``Filter`` by ``Coscheduling``
    with the episode's ``GangUnschedulable``, and a ``GangPreemptionWasted`` after it when the
    evictions did not help; ``None`` without an open episode."""
    episode = episode_finding(state)
    if episode is None:
        return None
    reasons = [reason_of(episode)]
    pre = preemption_rules.preemption_finding(state)
    if pre is not None and pre["reason"] == preemption_rules.WASTED.name:
        reasons.append(reason_of(pre))
    if is_native(state.gang):  # NG10: kube-scheduler's pod-group cycle could not place it
        where, by = "PlacementFeasible", "GangScheduling: minCount cannot be satisfied"
    else:
        where, by = "Filter", "Coscheduling"
    return {"held_at": where, "held_by": by,
            "reasons": reasons,
            "unblock": [UNSCHEDULABLE.unblock_text(state, episode["facts"])]}


TIMER: TimerRule = TimerRule("unschedulable", "failure episode settled", unschedulable_due,
                  warn_unschedulable)
DECISION: Decision = Decision("unschedulable", decide_unschedulable)
RULE: Rule = Rule("unschedulable", (UNSCHEDULABLE,), (TIMER,), (DECISION,), finding, why,
                  (KOORDINATOR, KUBE_SCHEDULER))
