"""The gang's settings: values the scheduler silently replaces, and members that disagree.

Reasons: ``GangSpecInvalid`` and ``GangSpecConflict`` (Warning). No timer.

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from typing import Any

from ..records import GangRecord, PodGroupObserved, PodObserved
from ..settings import Output
from ..spec import MAX_PERMIT_WAIT_MICROS
from ..state import GangState
from .base import Decision, Reason, Rule, Step, emit

PERMIT_CAP_TEXT = f"{MAX_PERMIT_WAIT_MICROS // 1_000_000}s"
"""The ``effective`` waiting time of a ``GangSpecInvalid`` for a waiting time above
kube-scheduler's 15-minute cap on a Permit wait (rule T3, ``spec.MAX_PERMIT_WAIT_MICROS``)."""


def _invalid_message(gang: str, f: dict[str, Any]) -> str:
    if f["field"] == "groups" and f["value"] == f["effective"]:
        return (f"gang {gang}: groups {f['value']} does not list the gang itself; the scheduler "
                f"uses the list as written, so {gang} is not a member of its own gang group")
    if f["field"] in ("waiting-time", "scheduleTimeoutSeconds") \
            and f["effective"] == PERMIT_CAP_TEXT:
        return (f"gang {gang}: {f['field']} {f['value']!r} is longer than kube-scheduler lets a "
                f"pod wait at Permit; members wait at most {f['effective']} (15 minutes)")
    return (f"gang {gang}: {f['field']} {f['value']!r} is not valid; the scheduler silently "
            f"uses {f['effective']}")


def _conflict_message(gang: str, f: dict[str, Any]) -> str:
    parts = "; ".join(f"{value!r} on {', '.join(pods)}"
                      for value, pods in sorted(f["values"].items()))
    return (f"gang {gang}: members disagree on {f['field']} ({parts}); the scheduler "
            f"keeps the value of the object that initialised the gang")


INVALID: Reason = Reason("GangSpecInvalid", "Warning", _invalid_message)
CONFLICT: Reason = Reason("GangSpecConflict", "Warning", _conflict_message)


def spec_conflicts(state: GangState) -> dict[str, dict[str, list[str]]]:
    """Settings the members (and the PodGroup, named ``PodGroup/<name>``) disagree on:
    ``{field: {value as written: [pod names]}}`` for fields with two or more values."""
    distinct = {m.settings for m in state.members.values()}
    if state.podgroup is not None:
        distinct.add(state.podgroup.settings)
    if len(distinct) <= 1:
        return {}  # every object writes the same settings (the common case): no scan by field
    values: dict[str, dict[str, list[str]]] = {}
    sources = [(m.name, m.settings) for m in state.members.values()]
    if state.podgroup is not None:
        sources.insert(0, (f"PodGroup/{state.podgroup.name}", state.podgroup.settings))
    for name, settings in sources:
        for field, value in settings.as_written():
            if value is not None:
                values.setdefault(field, {}).setdefault(value, []).append(name)
    return {field: by_value for field, by_value in values.items() if len(by_value) > 1}


def _spec_may_have_changed(before: GangState, state: GangState, rec: GangRecord) -> bool:
    """Only a Pod that joined, left or changed its settings, or a PodGroup event, can change
    the fallbacks or the disagreements; every other record skips the O(members) scan."""
    if isinstance(rec, PodGroupObserved):
        return True
    if before.spec_source != state.spec_source or before.spec_settings != state.spec_settings:
        return True
    if isinstance(rec, PodObserved):
        old, new = before.members.get(rec.uid), state.members.get(rec.uid)
        return old is None or new is None or old.settings != new.settings
    return False


def decide_spec(state: GangState, s: Step, out: list[Output]) -> GangState:
    """``GangSpecInvalid`` for each value the scheduler silently replaces (``state.fallbacks``)
    and ``GangSpecConflict`` for each field the members disagree on (``spec_conflicts``), at
    ``s.at`` (microseconds of event time), each when its facts change; only after a record
    that can change them (``_spec_may_have_changed``)."""
    at = s.at
    if not _spec_may_have_changed(s.before, state, s.rec):
        return state
    for fb in state.fallbacks:
        state = emit(state, f"GangSpecInvalid:{fb.field}", INVALID,
                      {"field": fb.field, "value": fb.value, "effective": fb.effective}, at, out)
    for field, by_value in spec_conflicts(state).items():
        state = emit(state, f"GangSpecConflict:{field}", CONFLICT,
                      {"field": field, "values": by_value}, at, out)
    return state


def finding(state: GangState) -> list[dict[str, Any]]:
    """The spec's warnings as findings of ``describe gang`` (and reasons of every pod's
    ``explain pod``): ``GangSpecInvalid`` for each value the scheduler silently replaces, then
    ``GangSpecConflict`` for each field the members disagree on, as ``decide_spec`` emits
    them."""
    out: list[dict[str, Any]] = []
    for fb in state.fallbacks:
        facts: dict[str, Any] = {"field": fb.field, "value": fb.value, "effective": fb.effective}
        out.append({"reason": INVALID.name, "type": INVALID.type,
                    "message": INVALID.message(state.gang, facts), "facts": facts})
    for field, values in spec_conflicts(state).items():
        facts = {"field": field, "values": values}
        out.append({"reason": CONFLICT.name, "type": CONFLICT.type,
                    "message": CONFLICT.message(state.gang, facts), "facts": facts})
    return out


DECISION: Decision = Decision("spec", decide_spec)
RULE: Rule = Rule("spec", (INVALID, CONFLICT), (), (DECISION,), finding)
