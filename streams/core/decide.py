"""Decisions: which diagnostics and commands a gang's new state calls for, asking each rule
family (``streams.core.rules``) in a fixed order.

Where it sits: the functional core, called by ``streams.core.fold.step`` after a record has been
applied; the fold fires the families' timers itself (``rules.next_timer``). Outputs are data:
JSON-ready ``gangstate.diagnostic/v1`` and ``gangstate.command/v1`` dicts that a sink writes
elsewhere. A diagnostic is emitted when its facts change, never on every input: the state keeps,
per diagnostic key, the digest of the facts last emitted. The functions that return a state
assign fields of the state they are given and return it: they are only called on the fold's own
new copy (``fold.step``, ``fold.fire_timers``), never on a state handed out.

A new rule family is a module under ``streams/core/rules/`` with its entries in the registry
(``rules.registry``: ``RULES``, ``DECISIONS``, ``TIMERS``); nothing here changes.

Must not: read the clock, draw uuids, do I/O or import infrastructure (ids: ``rules.base``).
"""

from __future__ import annotations

from typing import Any, Callable

from .records import GangRecord, GangSummarized
from .rules import DECISIONS_FOR
from .rules import message as message
from .rules.base import COMMAND_SCHEMA as COMMAND_SCHEMA
from .rules.base import DIAGNOSTIC_SCHEMA as DIAGNOSTIC_SCHEMA
from .rules.base import SUMMARY_SCHEMA as SUMMARY_SCHEMA
from .rules.base import Step
from .rules.base import skips_gang_checks as skips_gang_checks
from .rules.hold import HELD_REASONS as HELD_REASONS
from .rules.hold import hold as hold
from .rules.resend import open_warnings as open_warnings
from .rules.resend import resend_to_joined as resend_to_joined
from .settings import FoldSettings, Output
from .state import GangState

_RUNS: dict[str, tuple[Callable[[GangState, Step, list[Output]], GangState], ...]] = {
    scheduler: tuple(d.run for d in decisions) for scheduler, decisions in DECISIONS_FOR.items()}
"""``rules.DECISIONS_FOR``' functions per gang scheduler, unpacked once: ``decide`` runs on
every record."""


def decide(state: GangState, rec: GangRecord, settings: FoldSettings,
           before_rep: str | None = None, before: GangState | None = None,
           ) -> tuple[GangState, list[dict[str, Any]]]:
    """Decide the outputs of the state reached by applying ``rec``: the decision of each rule
    family that runs for the gang's scheduler (``rules.DECISIONS_FOR``), in that order.

    Order of outputs for one record: spec findings (``GangSpecInvalid``, ``GangSpecConflict``),
    the PreEnqueue hold (``rules.hold``: ``GangNotInitialized``/``GangMembersInsufficient``/
    ``GangGroupIncomplete``/``GangMemberGated`` re-emitted when their facts change after the
    grace period, ``GangMembersSatisfied`` when the hold ends, or ``GangMembersUngated`` when
    it ends after a ``GangMemberGated``), the open warnings sent again to a member that joined
    (``rules.resend``), ``GangPermitTimeout`` (the scheduler's own ``Timeout`` records),
    ``GangPreempting``/``GangPreemptionWasted`` (when due), ``GangUnschedulable`` (a failure
    episode's, when due), commands (``ElectRepresentative``, ``RepresentativeGated``
    switches, then gangstate's ``HoldGang``/``ReleaseGang`` with ``GangHeld``/``GangReleased``), ``GangMembersLost``/``GangMembersRestored``, ``GangScheduled``, then
    ``gangstate.gang-summary/v1`` records for the other gangs of the group. ``before`` is the
    state before the record was applied (``before_rep`` its representative).
    """
    out: list[dict[str, Any]] = []
    before = state if before is None else before
    # A peer's summary can arrive long after the gang's own later records: decide at the
    # gang's own time then, never before it.
    at = max(rec.at, before.clock) if isinstance(rec, GangSummarized) else rec.at
    step = Step(before, rec, at, settings, before_rep)
    for decision in _RUNS[state.scheduler]:
        state = decision(state, step, out)
    return state, out
