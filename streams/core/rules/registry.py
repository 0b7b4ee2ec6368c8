"""The registry of the core's rule families (re-exported by ``streams.core.rules``): one module
per family, each owning its Event reasons (name, type, message: ``base.Reason``) and its timers
(``base.TimerRule``).

Where it sits: between the decisions (``streams.core.decide``, which runs each family's
``Decision`` in the order of ``DECISIONS`` here) and the families below. Read by the fold (``timers``,
``next_timer``: the gang's timers as values, asked once), by the decisions (``DECISIONS``, run
in order on every record), by ``streams.core.explain`` and the
worker (``message``, ``REASONS``), and by the wire contract (``REASON_NAMES`` is its
``DiagnosticReason``). A new rule is a new module in ``streams/core/rules/`` plus its entry in
``RULES`` and ``DECISIONS`` (and in ``TIMERS`` when it owns a timer); what ``explain`` says of
it comes from its ``Rule.findings``, ``Rule.why`` and ``Reason.unblock`` (listed in
``FINDINGS`` and ``WHY`` here, which fix the order ``explain`` walks them in).

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from typing import Any, Callable

from ..native import SCHEDULERS
from ..settings import FoldSettings
from ..state import GangState, Member
from . import (group, hold, holding, lost, permit, preemption, representative, resend,
               retry, scheduled, spec, stranded, topology, unschedulable)
from .base import Decision, Reason, Rule, Timer, TimerRule, canonical_json



RULES: tuple[Rule, ...] = (
    hold.RULE, spec.RULE, permit.RULE, scheduled.RULE, unschedulable.RULE, stranded.RULE,
    preemption.RULE, lost.RULE, group.RULE, representative.RULE, resend.RULE, topology.RULE,
    holding.RULE, retry.RULE,
)
"""Every rule family, in the order their reasons are listed (the wire contract's
``DiagnosticReason``, docs/contracts.md)."""

DECISIONS: tuple[Decision, ...] = (
    spec.DECISION, hold.DECISION, stranded.DECISION, resend.DECISION, permit.DECISION,
    preemption.DECISION, retry.DECISION, unschedulable.DECISION, representative.ELECT,
    representative.GATED,
    holding.DECISION, lost.DECISION, scheduled.DECISION, topology.DECISION, group.DECISION,
)
"""Every family's decision on a record, in the order they run (``decide.decide``), which is the
order of a record's outputs: the spec's findings first (so that a hold's facts use the spec the
record brought), the refusals of the hold tracked before the open warnings are sent again to a
member that joined, commands after the diagnostics (gangstate's hold after the failure
episode's warning, whose settling it waits for), the group's summaries last (they tell the
peers of the state every other family has left)."""

TIMERS: tuple[TimerRule, ...] = (
    group.ANSWERS, hold.GRACE, preemption.TIMER, retry.TIMER, unschedulable.TIMER, hold.REFRESH,
    stranded.TIMER, lost.TIMER, permit.TIMER, holding.TIMER,
)
"""Every timer of every family, in the order that breaks ties: when two are due at the same
event time, the earlier one here fires first (answers owed to peers before the hold's own
warning, so the answer tells of the gang as of the due time)."""

FINDINGS_ORDER: tuple[Rule, ...] = (hold.RULE, holding.RULE, spec.RULE, preemption.RULE,
                                     retry.RULE, unschedulable.RULE, lost.RULE, scheduled.RULE,
                                     stranded.RULE, topology.RULE)
"""The families whose ``findings`` (``Rule.findings``) ``explain.findings`` lists, in order:
the PreEnqueue hold, gangstate's own hold (``holding``), the spec's warnings, the preemption,
a gang not tried since its preemption made room (``retry``), the failure episode, the members lost (or else the gang scheduled), the stranded members, the
network topology."""

WHY_ORDER: tuple[Rule, ...] = (hold.RULE, holding.RULE, topology.RULE, stranded.RULE,
                                scheduled.RULE, preemption.RULE, retry.RULE, unschedulable.RULE)
"""The families whose ``why`` (``Rule.why``) ``explain.why_pod`` asks for a member not bound
to a node, in order (the first answer wins): the gang's PreEnqueue hold, gangstate's own hold
(the shim refuses the members at PreEnqueue), the network topology, the stranded members, a
gang that skips the gang checks (``scheduled``: rule P4), the preemption in progress, the
failure episode. A member with scheduling gates is asked only the hold's (its gates hold it at
PreEnqueue whatever else holds the gang)."""

FINDINGS: tuple[Callable[[GangState], list[dict[str, Any]]], ...] = tuple(
    rule.findings for rule in FINDINGS_ORDER if rule.findings is not None)
"""Every family's ``findings``, in ``FINDINGS_ORDER`` (all schedulers; ``FINDINGS_FOR`` has
each scheduler's)."""

WHY: tuple[Callable[[GangState, Member], dict[str, Any] | None], ...] = tuple(
    rule.why for rule in WHY_ORDER if rule.why is not None)
"""Every family's ``why``, in ``WHY_ORDER`` (all schedulers; ``WHY_FOR`` has each
scheduler's)."""


def _owner(part: object, field: str) -> Rule:
    for rule in RULES:
        if any(p is part for p in getattr(rule, field)):
            return rule
    raise LookupError(f"{part!r} is listed in the registry but owned by no family's {field}")


DECISIONS_FOR: dict[str, tuple[Decision, ...]] = {
    s: tuple(d for d in DECISIONS if s in _owner(d, "decisions").schedulers) for s in SCHEDULERS}
"""Per gang scheduler (``native.SCHEDULERS``): the decisions of the families that run for it,
in ``DECISIONS`` order (``decide.decide`` runs the gang's own)."""

TIMERS_FOR: dict[str, tuple[TimerRule, ...]] = {
    s: tuple(t for t in TIMERS if s in _owner(t, "timers").schedulers) for s in SCHEDULERS}
"""Per gang scheduler: the timers of the families that run for it, in ``TIMERS`` order."""

FINDINGS_FOR: dict[str, tuple[Callable[[GangState], list[dict[str, Any]]], ...]] = {
    s: tuple(r.findings for r in FINDINGS_ORDER if r.findings is not None and s in r.schedulers)
    for s in SCHEDULERS}
"""Per gang scheduler: its families' ``findings``, in ``FINDINGS_ORDER``."""

WHY_FOR: dict[str, tuple[Callable[[GangState, Member], dict[str, Any] | None], ...]] = {
    s: tuple(r.why for r in WHY_ORDER if r.why is not None and s in r.schedulers)
    for s in SCHEDULERS}
"""Per gang scheduler: its families' ``why``, in ``WHY_ORDER``."""

REASONS: dict[str, Reason] = {r.name: r for rule in RULES for r in rule.reasons}
"""Every Event reason the core emits, by name, in ``RULES`` order."""

REASON_NAMES: tuple[str, ...] = tuple(REASONS)
"""The names of ``REASONS``, in order (the wire contract's ``DiagnosticReason``)."""

TIMER_RULES: dict[str, TimerRule] = {t.kind: t for t in TIMERS}
"""Every timer rule by its ``kind``."""


def reason_type(reason: str) -> str:
    """The Event type (``Normal`` or ``Warning``) of ``reason``; ``Warning`` for a reason no
    family owns."""
    found = REASONS.get(reason)
    return "Warning" if found is None else found.type


def message(gang: str, reason: str, facts: dict[str, Any]) -> str:
    """The human message of a diagnostic of ``reason`` (its family's message function): a
    deterministic function of gang, reason and facts; for a reason no family owns,
    ``gang <gang>: <reason> <canonical facts>``."""
    found = REASONS.get(reason)
    if found is None:
        return f"gang {gang}: {reason} {canonical_json(facts)}"
    return found.message(gang, facts)


_DUES_FOR: dict[str, tuple[tuple[Callable[[GangState, FoldSettings], int | None], str], ...]] = {
    s: tuple((t.due, t.kind) for t in TIMERS_FOR[s]) for s in SCHEDULERS}
"""``TIMERS_FOR``' due functions and kinds, unpacked once: ``next_timer`` runs on every
record."""


def timers(state: GangState, settings: FoldSettings) -> list[Timer]:
    """The gang's pending timers as values (``Timer(due, kind)``), in ``TIMERS`` order, of the
    families that run for its scheduler. Timers are not stored: they follow from the state."""
    out = []
    for due_of, kind in _DUES_FOR[state.scheduler]:
        due = due_of(state, settings)
        if due is not None:
            out.append(Timer(due, kind))
    return out


def next_timer(state: GangState, settings: FoldSettings) -> Timer | None:
    """The gang's earliest pending timer (ties: the first in ``TIMERS``), or ``None``."""
    best_kind = ""
    best_due = 0
    for due_of, kind in _DUES_FOR[state.scheduler]:
        due = due_of(state, settings)
        if due is not None and (not best_kind or due < best_due):
            best_kind, best_due = kind, due
    return Timer(best_due, best_kind) if best_kind else None
