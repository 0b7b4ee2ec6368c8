"""Decision rules: which diagnostics and commands a gang's new state calls for.

Where it sits: the functional core, called by ``streams.core.fold.step`` after a record has been
applied, and by ``fire_timers`` when a grace period ends. Outputs are data: JSON-ready
``gangstate.diagnostic/v1`` and ``gangstate.command/v1`` dicts that a sink writes elsewhere.
A diagnostic is emitted when its facts change, never on every input: the state keeps, per
diagnostic key, the digest of the facts last emitted.

Must not: read the clock, draw uuids, do I/O or import infrastructure. Ids are derived from the
log: ``<gang>#<reason>#<sha256(canonical facts)[:12]>`` for diagnostics and
``<gang group>#<epoch>`` for commands (contracts.md).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .timefmt import format_time

DIAGNOSTIC_SCHEMA = "gangstate.diagnostic/v1"
COMMAND_SCHEMA = "gangstate.command/v1"
from .records import FAILED_STATUSES, CycleObserved, GangRecord, PodObserved
from .state import GangState

if TYPE_CHECKING:
    from .fold import FoldSettings, Output

HELD_REASONS = ("GangNotInitialized", "GangMembersInsufficient")
WAITING_STATUSES = ("Wait", "Gated")
"""A representative in one of these statuses is parked: waiting at Permit or held at PreEnqueue."""


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: the canonical form hashed into diagnostic ids."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def facts_digest(facts: dict[str, Any]) -> str:
    """First 12 hex digits of sha256 of the canonical JSON of ``facts``."""
    return hashlib.sha256(canonical_json(facts).encode()).hexdigest()[:12]


def involved(state: GangState) -> list[dict[str, str]]:
    """Every live member Pod (arrival order) and the PodGroup when one exists."""
    ns = state.namespace
    out = [{"kind": "Pod", "namespace": ns, "name": m.name, "uid": uid}
           for uid, m in state.members.items()]
    if state.podgroup is not None:
        out.append({"kind": "PodGroup", "namespace": ns, "name": state.podgroup.name,
                    "uid": state.podgroup.uid})
    return out


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def message(gang: str, reason: str, facts: dict[str, Any]) -> str:
    """The human message of a diagnostic: a deterministic function of gang, reason and facts."""
    f = facts
    if reason == "GangNotInitialized":
        return (f"gang {gang} is not initialized: {f['members']} "
                f"{_plural(f['members'], 'pod names', 'pods name')} it, but no PodGroup and no "
                f"min-available annotation gives its spec; scheduling is held at PreEnqueue")
    if reason == "GangMembersInsufficient":
        missing = f["min_member"] - f["members"]
        return (f"gang {gang} has {f['members']} of minMember {f['min_member']} pods; "
                f"scheduling is held at PreEnqueue until {missing} more "
                f"{_plural(missing, 'exists', 'exist')}")
    if reason == "GangMembersSatisfied":
        return (f"gang {gang} has {f['members']} of minMember {f['min_member']} pods; "
                f"no longer held at PreEnqueue")
    if reason == "GangScheduled":
        return f"gang {gang} is scheduled: {f['bound']} of minMember {f['min_member']} pods bound"
    if reason == "GangSpecInvalid":
        return (f"gang {gang}: {f['field']} {f['value']!r} is not valid; the scheduler silently "
                f"uses {f['effective']}")
    if reason == "GangSpecConflict":
        parts = "; ".join(f"{value!r} on {', '.join(pods)}"
                          for value, pods in sorted(f["values"].items()))
        return (f"gang {gang}: members disagree on {f['field']} ({parts}); the scheduler "
                f"keeps the value of the object that initialised the gang")
    if reason == "GangCycleRejected":
        reasons = ", ".join(f"{n} {r or 'unknown'}" for r, n in sorted(f["reasons"].items()))
        text = (f"gang {gang} failed scheduling cycle {f['cycle']}: {f['failed']} "
                f"{_plural(f['failed'], 'member', 'members')} unschedulable")
        if reasons:
            text += f" ({reasons})"
        return text + (f", {f['rejected_waiting']} waiting "
                       f"{_plural(f['rejected_waiting'], 'member', 'members')} rejected")
    return f"gang {gang}: {reason} {canonical_json(facts)}"


_TYPES = {"GangMembersSatisfied": "Normal", "GangScheduled": "Normal"}


def diagnostic(state: GangState, reason: str, facts: dict[str, Any], at: int) -> dict[str, Any]:
    """Build one ``gangstate.diagnostic/v1`` record (JSON-ready) for ``state``'s gang.

    ``at`` is event time in microseconds; it becomes ``observed_at``.
    """
    gang = state.gang
    return {
        "schema": DIAGNOSTIC_SCHEMA,
        "id": f"{gang}#{reason}#{facts_digest(facts)}",
        "observed_at": format_time(at),
        "gang": gang,
        "gang_group": state.gang_group,
        "type": _TYPES.get(reason, "Warning"),
        "reason": reason,
        "message": message(gang, reason, facts),
        "involved": involved(state),
        "facts": facts,
    }


def _emit(state: GangState, key: str, reason: str, facts: dict[str, Any], at: int,
          out: list[dict[str, Any]]) -> GangState:
    """Append a diagnostic when its facts differ from the last emitted under ``key``."""
    digest = facts_digest({"reason": reason, **facts})
    if state.emitted.get(key) == digest:
        return state
    out.append(diagnostic(state, reason, facts, at))
    return replace(state, emitted={**state.emitted, key: digest})


def held_reason(state: GangState) -> str | None:
    """Why the gang's pending pods are held at PreEnqueue, or ``None``.

    Held means: at least one member is pending, and the gang is not initialised
    (``GangNotInitialized``) or has fewer live members than minMember
    (``GangMembersInsufficient``): Koordinator's PreEnqueue basic check
    (``core/core.go`` ``PreEnqueue``, ``GangBasicCheckUnsatisfied``).
    """
    if not any(m.pending for m in state.members.values()):
        return None
    spec = state.spec
    if spec is None:
        return "GangNotInitialized"
    if len(state.members) < spec.min_member:
        return "GangMembersInsufficient"
    return None


def held_facts(state: GangState, reason: str) -> dict[str, Any]:
    """Facts of a hold warning: ``members`` and, once initialised, ``min_member`` and
    ``total_number``."""
    if reason == "GangNotInitialized":
        return {"members": len(state.members)}
    spec = state.spec
    assert spec is not None
    return {"members": len(state.members), "min_member": spec.min_member,
            "total_number": spec.total_number}


def warn_held(state: GangState, at: int) -> tuple[GangState, list[dict[str, Any]]]:
    """Emit the hold warning whose grace period ended at ``at`` and mark the hold as warned."""
    reason = held_reason(state)
    out: list[dict[str, Any]] = []
    if reason is None:
        return replace(state, held_since=None, warned=False), out
    state = _emit(state, reason, reason, held_facts(state, reason), at, out)
    return replace(state, warned=True), out


def _decide_hold(state: GangState, at: int, out: list[dict[str, Any]]) -> GangState:
    reason = held_reason(state)
    if reason is not None:
        if state.held_since is None:
            return replace(state, held_since=at, warned=False)
        if state.warned:
            return _emit(state, reason, reason, held_facts(state, reason), at, out)
        return state
    if state.held_since is None:
        return state
    spec = state.spec
    if state.warned and spec is not None and len(state.members) >= spec.min_member:
        state = _emit(state, "GangMembersSatisfied", "GangMembersSatisfied",
                      {"members": len(state.members), "min_member": spec.min_member}, at, out)
    emitted = {k: v for k, v in state.emitted.items()
               if k not in HELD_REASONS and k != "GangMembersSatisfied"}
    return replace(state, held_since=None, warned=False, emitted=emitted)


def _decide_spec(state: GangState, at: int, out: list[dict[str, Any]]) -> GangState:
    for fb in state.fallbacks:
        state = _emit(state, f"GangSpecInvalid:{fb.field}", "GangSpecInvalid",
                      {"field": fb.field, "value": fb.value, "effective": fb.effective}, at, out)
    values: dict[str, dict[str, list[str]]] = {}
    sources = [(m.name, m.settings) for m in state.members.values()]
    if state.podgroup is not None:
        sources.insert(0, (f"PodGroup/{state.podgroup.name}", state.podgroup.settings))
    for name, settings in sources:
        for field, value in settings.as_written():
            if value is not None:
                values.setdefault(field, {}).setdefault(value, []).append(name)
    for field, by_value in values.items():
        if len(by_value) > 1:
            state = _emit(state, f"GangSpecConflict:{field}", "GangSpecConflict",
                          {"field": field, "values": by_value}, at, out)
    return state


def _decide_cycle(state: GangState, rec: CycleObserved, out: list[dict[str, Any]]) -> GangState:
    if rec.cycle != state.cycle:
        return state
    statuses = list(state.outcomes.values())
    failed = [reason for status, reason in statuses if status in FAILED_STATUSES]
    rejected = sum(1 for status, _ in statuses if status == "Rejected")
    if not failed and not rejected:
        return state
    reasons: dict[str, int] = {}
    for reason in failed:
        reasons[reason] = reasons.get(reason, 0) + 1
    facts = {"cycle": rec.cycle, "failed": len(failed), "rejected_waiting": rejected,
             "reasons": reasons}
    return _emit(state, "GangCycleRejected", "GangCycleRejected", facts, rec.at, out)


def command(state: GangState, type_: str, expected: str | None, representative: str,
            reason: str, at: int, cycle: int | None) -> tuple[GangState, dict[str, Any]]:
    """Issue a command for the gang's group: bumps the epoch (never reset) and returns the new
    state with the ``gangstate.command/v1`` record. ``id`` is ``<gang group>#<epoch>``."""
    epoch = state.epoch + 1
    group = state.gang_group
    cmd = {
        "schema": COMMAND_SCHEMA,
        "id": f"{group}#{epoch}",
        "issued_at": format_time(at),
        "type": type_,
        "gang_group": group,
        "epoch": epoch,
        "expected_representative": expected,
        "representative": representative,
        "reason": reason,
        "cycle": cycle,
    }
    return replace(state, epoch=epoch), cmd


def _decide_switch(before_rep: str | None, state: GangState, rec: CycleObserved,
                   out: list[dict[str, Any]]) -> GangState:
    """SwitchRepresentative: a member other than the representative failed its cycle while the
    representative is parked (waiting at Permit or gated at PreEnqueue). At most one command per
    cycle; the releases (``Rejected``) that follow a failure issue none. This is the switch that
    Koordinator did in PostFilter (PR #2417), moved out of the scheduler so that it always
    happens and never races preemption (contracts.md, ``gangstate.command/v1``)."""
    if rec.status not in FAILED_STATUSES or state.command_cycle == rec.cycle:
        return state
    rep = rec.representative or before_rep
    if rep is None or rep == rec.pod:
        return state
    found = state.member_by_name(rep)
    if found is None or found[1].status not in WAITING_STATUSES:
        return state
    state, cmd = command(state, "SwitchRepresentative", rep, rec.pod, "MemberFailedCycle",
                         rec.at, rec.cycle)
    out.append(cmd)
    return replace(state, command_cycle=rec.cycle)


def _decide_elect(before_rep: str | None, state: GangState, rec: PodObserved,
                  out: list[dict[str, Any]]) -> GangState:
    """ElectRepresentative: the representative pod was deleted while members still wait to be
    scheduled; name the earliest-arrived pending member (Koordinator drops a deleted
    representative, ``PodDeleted``, and issue #2773 shows a group left without one)."""
    if rec.type != "DELETED" or before_rep is None or before_rep != f"{rec.namespace}/{rec.name}":
        return state
    if state.representative is not None:
        return state
    pending = [m.name for m in state.members.values() if m.pending]
    if not pending:
        return state
    state, cmd = command(state, "ElectRepresentative", before_rep,
                         f"{state.namespace}/{pending[0]}", "RepresentativeDeleted", rec.at, None)
    out.append(cmd)
    return state


def _decide_scheduled(state: GangState, at: int, out: list[dict[str, Any]]) -> GangState:
    spec = state.spec
    if spec is None or not state.members:
        return state
    bound = state.bound
    if bound < spec.min_member or bound == 0:
        return state
    state = _emit(state, "GangScheduled", "GangScheduled",
                  {"bound": bound, "min_member": spec.min_member}, at, out)
    return state if state.ever_scheduled else replace(state, ever_scheduled=True)


def decide(state: GangState, rec: GangRecord, settings: "FoldSettings",
           before_rep: str | None = None) -> tuple[GangState, list[dict[str, Any]]]:
    """Decide the outputs of the state reached by applying ``rec``.

    Order of outputs for one record: spec findings (``GangSpecInvalid``, ``GangSpecConflict``),
    the PreEnqueue hold (``GangNotInitialized``/``GangMembersInsufficient`` re-emitted when their
    facts change after the grace period, ``GangMembersSatisfied`` when the hold ends),
    ``GangCycleRejected``, commands, ``GangScheduled``. ``before_rep`` is the representative
    before the record was applied.
    """
    out: list[dict[str, Any]] = []
    at = rec.at
    state = _decide_spec(state, at, out)
    state = _decide_hold(state, at, out)
    if isinstance(rec, CycleObserved):
        state = _decide_cycle(state, rec, out)
        state = _decide_switch(before_rep, state, rec, out)
    elif isinstance(rec, PodObserved):
        state = _decide_elect(before_rep, state, rec, out)
    state = _decide_scheduled(state, at, out)
    return state, out
