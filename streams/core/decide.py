"""Decisions: which diagnostics and commands a gang's new state calls for, asking each rule
family (``streams.core.rules``) in a fixed order.

Where it sits: the functional core, called by ``streams.core.fold.step`` after a record has been
applied; the fold fires the families' timers itself (``rules.next_timer``). Outputs are data:
JSON-ready ``gangstate.diagnostic/v1`` and ``gangstate.command/v1`` dicts that a sink writes
elsewhere. A diagnostic is emitted when its facts change, never on every input: the state keeps,
per diagnostic key, the digest of the facts last emitted. The functions that return a state
assign fields of the state they are given and return it: they are only called on the fold's own
new copy (``fold.step``, ``fold.fire_timers``), never on a state handed out.

A warning that still holds with the facts last emitted is sent again to every member that joins
later (``resend_to_joined``): the sink writes one Event per pod named in a diagnostic, so a pod
recreated by its controller (new uid) would otherwise never hear of its gang's invalid settings
or of the hold that keeps it at PreEnqueue.

Must not: read the clock, draw uuids, do I/O or import infrastructure (ids: ``rules.base``).
"""

from __future__ import annotations

from typing import Any

from .records import CycleObserved, GangRecord, GangSummarized, PodObserved
from .rules import REASONS, group, lost, permit, preemption, representative, scheduled, spec
from .rules import hold as holds
from .rules import message as message
from .rules import stranded, unschedulable
from .rules.base import COMMAND_SCHEMA as COMMAND_SCHEMA
from .rules.base import DIAGNOSTIC_SCHEMA as DIAGNOSTIC_SCHEMA
from .rules.base import SUMMARY_SCHEMA as SUMMARY_SCHEMA
from .rules.base import diagnostic, emit_digests
from .rules.base import skips_gang_checks as skips_gang_checks
from .rules.hold import HELD_REASONS as HELD_REASONS
from .rules.hold import hold as hold
from .settings import FoldSettings
from .state import GangState


def open_warnings(state: GangState) -> list[tuple[str, str, dict[str, Any]]]:
    """The warnings that hold now with exactly the facts last emitted for them, as
    ``(emitted key, reason, facts)``: silent fallbacks (``GangSpecInvalid``), disagreements
    (``GangSpecConflict``) and a warned PreEnqueue hold (``hold.HOLD_KEY``). These are standing
    conditions, true until someone changes the gang; ``GangPermitTimeout`` reports one wait's
    outcome and is not open in this sense (the next wait reports afresh, to every member it
    involves), and ``GangUnschedulable`` is re-emitted, to every member, when its facts
    change."""
    emitted = state.emitted
    out: list[tuple[str, str, dict[str, Any]]] = []

    def still(key: str, reason: str, facts: dict[str, Any]) -> None:
        if emitted.get(key) == emit_digests(reason, facts)[0]:
            out.append((key, reason, facts))

    if not emitted:
        return out
    for fb in state.fallbacks:
        still(f"GangSpecInvalid:{fb.field}", spec.INVALID.name,
              {"field": fb.field, "value": fb.value, "effective": fb.effective})
    if any(key.startswith("GangSpecConflict:") for key in emitted):
        for field, by_value in spec.spec_conflicts(state).items():
            still(f"GangSpecConflict:{field}", spec.CONFLICT.name,
                  {"field": field, "values": by_value})
    if state.warned and holds.HOLD_KEY in emitted:
        found = holds.hold(state)
        if found is not None:
            still(holds.HOLD_KEY, *found)
    return out


def joined(before: GangState, state: GangState, rec: GangRecord) -> tuple[str, ...]:
    """The uid of the pod that ``rec`` made a member, when that uid was never seen before
    (not a member of ``before`` and not remembered as deleted); else ``()``."""
    if not isinstance(rec, PodObserved) or rec.type == "DELETED":
        return ()
    uid = rec.uid
    if uid in before.members or uid in before.tombstones or uid not in state.members:
        return ()
    return (uid,)


def resend_to_joined(before: GangState, state: GangState, rec: GangRecord, at: int,
                     out: list[dict[str, Any]]) -> GangState:
    """Send each open warning (``open_warnings``) again, with the same facts, to the member
    that ``rec`` brought in (``joined``), unless this record emitted it anyway (then it already
    names every member). Diagnostics are otherwise emitted only when their facts change, and the
    sink writes an Event per pod named: without this, a pod that joins after the warning (a
    late member, or one a Job/JobSet controller recreated with a new uid, same name or not)
    never gets an Event about its gang's invalid settings or its hold. The re-sent diagnostic
    names only the new pod (``diagnostic(pods=...)``), so the Events of the other members are
    not counted up again. Changes nothing in ``state``."""
    pods = joined(before, state, rec)
    if not pods:
        return state
    for key, reason, facts in open_warnings(state):
        if state.emitted.get(key) == before.emitted.get(key):
            out.append(diagnostic(state, REASONS[reason], facts, at, pods))
    return state


def decide(state: GangState, rec: GangRecord, settings: FoldSettings,
           before_rep: str | None = None, before: GangState | None = None,
           ) -> tuple[GangState, list[dict[str, Any]]]:
    """Decide the outputs of the state reached by applying ``rec``.

    Order of outputs for one record: spec findings (``GangSpecInvalid``, ``GangSpecConflict``),
    the PreEnqueue hold (``rules.hold``: (``GangNotInitialized``/``GangMembersInsufficient``/
    ``GangGroupIncomplete``/``GangMemberGated`` re-emitted when their facts change after the
    grace period, ``GangMembersSatisfied`` when the hold ends, or ``GangMembersUngated`` when
    it ends after a ``GangMemberGated``), the open
    warnings sent again to a member that joined (``resend_to_joined``), ``GangPermitTimeout``
    (the scheduler's own ``Timeout`` records), ``GangPreempting``/``GangPreemptionWasted``
    (``warn_preemption``, when due), ``GangUnschedulable`` (a failure episode's, when
    due), commands (``RepresentativeGated`` switches, ``ElectRepresentative``),
    ``GangScheduled``, then ``gangstate.gang-summary/v1`` records for the other gangs of the
    group. ``before`` is the state before the record was applied (``before_rep`` its
    representative).
    """
    out: list[dict[str, Any]] = []
    before = state if before is None else before
    # A peer's summary can arrive long after the gang's own later records: decide at the
    # gang's own time then, never before it.
    at = max(rec.at, before.clock) if isinstance(rec, GangSummarized) else rec.at
    state = spec.decide_spec(before, state, rec, at, out)
    state = holds.decide_hold(state, at, out, settings.refresh_micros)
    state = stranded.track_refusals(before, state, rec, at)
    state = resend_to_joined(before, state, rec, at, out)
    state = permit.decide_permit(state, rec, out)
    state = preemption.decide_preemption(state, at, out)
    if isinstance(rec, CycleObserved):
        state = unschedulable.decide_unschedulable(state, rec, settings, out)
        state = representative.decide_gated_representative(state, rec, out)
    elif isinstance(rec, PodObserved):
        state = representative.decide_elect(before_rep, state, rec, out)
        state = representative.decide_gated_representative(state, rec, out)
    state = lost.decide_lost(before, state, rec, at, out)
    state = scheduled.decide_scheduled(state, at, out)
    state = group.decide_summaries(before, state, rec, at, out)
    return state, out
