"""Open warnings sent again to a member that joins later (no reason of its own).

A warning that still holds with the facts last emitted is sent again to every member that joins
later (``resend_to_joined``): the sink writes one Event per pod named in a diagnostic, so a pod
recreated by its controller (new uid) would otherwise never hear of its gang's invalid settings
or of the hold that keeps it at PreEnqueue.

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from typing import Any

from ..records import GangRecord, PodObserved
from ..native import KOORDINATOR, KUBE_SCHEDULER
from ..settings import Output
from ..state import GangState
from . import hold as holds
from . import spec
from .base import Decision, Reason, Rule, Step, diagnostic, emit_digests


_REASONS: dict[str, Reason] = {r.name: r for r in (*spec.RULE.reasons, *holds.RULE.reasons)}
"""The reasons an open warning can have (``open_warnings``): the spec's and the hold's."""


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
    if state.hold.warned and holds.HOLD_KEY in emitted:
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


def resend_to_joined(state: GangState, s: Step, out: list[Output]) -> GangState:
    """Send each open warning (``open_warnings``) again, with the same facts and at ``s.at``
    (microseconds of event time), to the member that ``s.rec`` brought in (``joined``, against
    ``s.before``), unless this record emitted it anyway (then it already
    names every member). Diagnostics are otherwise emitted only when their facts change, and the
    sink writes an Event per pod named: without this, a pod that joins after the warning (a
    late member, or one a Job/JobSet controller recreated with a new uid, same name or not)
    never gets an Event about its gang's invalid settings or its hold. The re-sent diagnostic
    names only the new pod (``diagnostic(pods=...)``), so the Events of the other members are
    not counted up again. Changes nothing in ``state``."""
    before = s.before
    pods = joined(before, state, s.rec)
    if not pods:
        return state
    for key, reason, facts in open_warnings(state):
        if state.emitted.get(key) == before.emitted.get(key):
            out.append(diagnostic(state, _REASONS[reason], facts, s.at, pods))
    return state


DECISION: Decision = Decision("resend", resend_to_joined)
RULE: Rule = Rule("resend", (), (), (DECISION,), schedulers=(KOORDINATOR, KUBE_SCHEDULER))
