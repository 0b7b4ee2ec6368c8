"""gangstate's hold: a gang that cannot fit is held out of the scheduling queue until the cluster
changes (issue 24; docs/koordinator-rules.md rows H1-H5, docs/shim.md "Holding a gang that
cannot fit").

Commands: ``HoldGang`` (reason ``GangCannotFit``) and ``ReleaseGang`` (``CapacityChanged``,
``SpecChanged``, ``PriorityChanged``, ``HoldExpired``, ``HoldsOff``), fenced like every
command (``base.command``). Reasons: ``GangHeld`` (Normal: told when the scheduler shim acks
the first ``HoldGang`` of a hold ``Applied``) and ``GangReleased`` (Normal: the hold's end).
Timer: ``hold`` (the hold's renewal every ``hold_renew_seconds``, and its end after
``hold_max_seconds``).

Why: koord-scheduler v1.8.0 retries a gang group that cannot fit as fast as its queue lets it,
for as long as it exists (K = ``koordinator@v1.8.0/pkg/scheduler/plugins/coscheduling/``,
``core/core.go:150-187,336-339,376-378``): about 2,000 rounds (as the shim counts them) and
2,100-2,200 ``FailedScheduling`` Events a minute for one 3-pod GPU-short gang on the local
control plane (docs/shim.md, bench/holds.py), and
kube-scheduler's DefaultPreemption, which judges one pod at a time, evicts lower-priority pods
for members of a gang that still cannot fit (KS v1.35.2 ``framework/plugins/defaultpreemption/
default_preemption.go``; row PR3). Rules:
- H1 hold: the failure episode has settled (its ``GangUnschedulable`` told), is open, names the
  short resource's room (``capacity``) and proves the gang cannot fit even once preemption
  evicted every pod it may (``capacity.cannot_fit``, rule PR4); no preemption is in progress
  for it (rule PR2); a scheduler shim reports the gang (``shim_at``: someone applies the
  command); holds are on (``FoldSettings.holds``) and no member nor the PodGroup says
  ``gangstate.io/hold: off``; the gang does not skip the gang checks (rule P4); and, after a
  hold ended, a member failed again since (the scheduler tried it with the cluster as it is).
- H2 release on the cluster: the room the watch producer reports (``gangstate.capacity/v1``,
  or a cycle record's) no longer proves that the gang cannot fit.
- H3 release on the gang: its minMember or its members changed (``SpecChanged``), or its
  culprit's priority (``PriorityChanged``); holds turned off for it (``HoldsOff``); or it was
  held ``hold_max_seconds`` (``HoldExpired``).
- H4 renewal: while holding, a ``HoldGang`` again every ``hold_renew_seconds`` (the shim lets a
  hold lapse after the command's ``ttl_seconds``: gangstate silent, the gang is scheduled as
  before), and at once when the shim reports a round opened after the hold was applied (a
  restarted shim lost it).
- H5 refusal: a ``HoldGang`` the shim refuses (``PreconditionFailed``: a member nominated to
  a node with victims terminating, holds off in its namespace or scheduler) ends the hold; the
  same facts are not held again. So does a hold no shim acked within its ``ttl_seconds`` (a
  shim that applies no commands, ``GANGSTATE_SHIM_COMMANDS=0``): it is not renewed for ever.

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .. import episode as episodes
from .. import preemption as preemptions
from ..capacity import (Shortfall, cannot_fit, format_quantity, needs_text,
                        waiting_for_text)
from ..records import AckObserved, CycleObserved, PodGroupObserved, PodObserved
from ..settings import FoldSettings, Output
from ..state import HOLD_IDS, NO_HOLDING, GangState, Holding, Member
from ..timefmt import format_time
from .base import (Decision, Reason, Rule, Step, TimerRule, command, diagnostic, facts_digest,
                   has_objects, listed, reason_of, skips_gang_checks)
from .unschedulable import unschedulable_facts

HOLD_OFF_VALUES = ("off", "false")
"""Values of ``gangstate.io/hold`` that keep gangstate from holding the gang."""
LOST_HOLD_SECONDS = 5
"""A round the shim reports opened more than this long after the hold's last ``HoldGang`` means
the shim does not hold the gang (restarted, or the hold lapsed): H4 renews it at once."""


def _duration(micros: int) -> str:
    seconds = max(0, micros // 1_000_000)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def held_message(gang: str, facts: dict[str, Any]) -> str:
    """The message of ``GangHeld``, e.g. ``gangstate holds gang ns/g out of the scheduling
    queue: it cannot fit (needs 3 x 1 nvidia.com/gpu (3 members to place); the cluster has 2
    allocatable on 2 nodes, room for 2 members even once preemption evicted every pod it may);
    it is tried again when a node with at least 1 more nvidia.com/gpu joins, when its
    members, minMember or priority change, or after 1h00m; before the hold the scheduler ran
    950 rounds a minute and wrote 2190 FailedScheduling Events a minute for it``. Pure."""
    short = facts["shortfall"]
    q = format_quantity(short["resource"], short["allocatable"])
    room = short.get("room_preempting", short["room"])
    room_text = (f"room for {room} {'member' if room == 1 else 'members'}"
                 + (" even once preemption evicted every pod it may"
                    if "room_preempting" in short else " now"))
    return (f"gangstate holds gang {gang} out of the scheduling queue: it cannot fit (needs "
            f"{facts['needs']}; the cluster has {q} allocatable on {short['nodes']} "
            f"{'node' if short['nodes'] == 1 else 'nodes'}, {room_text}); it is tried again "
            f"when {facts['waiting_for']}, when its members, minMember or priority change, or "
            f"after {_duration(facts['max_seconds'] * 1_000_000)}; before the hold the "
            f"scheduler ran {facts['rounds_per_minute']} rounds a minute and wrote "
            f"{facts['events_per_minute']} FailedScheduling Events a minute for it")


def released_message(gang: str, facts: dict[str, Any]) -> str:
    """The message of ``GangReleased``, e.g. ``gangstate released gang ns/g after 3m12s: the
    cluster's nvidia.com/gpu changed (room for 3 of 3 members now); the scheduler tries it
    again``. Pure."""
    return (f"gangstate released gang {gang} after {_duration(facts['held_seconds'] * 1_000_000)}"
            f": {facts['detail']}; the scheduler tries it again")


def _unblock(state: GangState, facts: dict[str, Any]) -> str:
    return (f"gangstate lets the scheduler try the gang again when {facts['waiting_for']}, "
            f"when its members, minMember or priority change, or after "
            f"{_duration(facts['max_seconds'] * 1_000_000)}; annotate a member or the PodGroup "
            f"gangstate.io/hold=off to release it now")


HELD: Reason = Reason("GangHeld", "Normal", held_message, _unblock)
RELEASED: Reason = Reason("GangReleased", "Normal", released_message)


def opted_out(state: GangState) -> str | None:
    """Who turned holds off for the gang: ``pod <name>`` or ``PodGroup <name>`` carrying
    ``gangstate.io/hold`` ``off``/``false`` (``spec.ANNOTATION_HOLD``), else ``None``."""
    pg = state.podgroup
    if pg is not None and (pg.settings.hold or "").lower() in HOLD_OFF_VALUES:
        return f"PodGroup {pg.name}"
    for m in state.members.values():
        if (m.settings.hold or "").lower() in HOLD_OFF_VALUES:
            return f"pod {m.name}"
    return None


def _uid_digest(state: GangState) -> str:
    return facts_digest({"uids": sorted(state.members)})


def basis(state: GangState, short: Shortfall) -> tuple[Any, ...]:
    """What the gang was held on, compared while it is held (H3): ``(minMember, members,
    digest of the member uids, the culprit's priority or None)``."""
    spec = state.spec
    return (None if spec is None else spec.min_member, len(state.members), _uid_digest(state),
            short.priority)


def shortfall_now(state: GangState) -> tuple[dict[str, Any], Shortfall] | None:
    """The failure episode's facts and their ``Shortfall`` (``episode.shortfall_of``), or
    ``None`` without an episode that names the room of a short resource."""
    facts = unschedulable_facts(state)
    if facts is None:
        return None
    short = episodes.shortfall_of(facts)
    return None if short is None else (facts, short)


def verdict(state: GangState, at: int, settings: FoldSettings) -> dict[str, Any] | None:
    """The ``GangHeld`` facts when rule H1 holds the gang at event time ``at`` (microseconds),
    else ``None``: ``shortfall`` (the episode's), ``min_member``, ``needs``, ``waiting_for``,
    ``rounds_per_minute`` (the episode's rounds over its length), ``events_per_minute`` (its
    storm, ``episode.per_minute``) and ``max_seconds``."""
    if not settings.holds or state.shim_at is None or skips_gang_checks(state):
        return None
    ep = state.episode
    if ep is None or ep.emitted_at is None \
            or not episodes.is_open(ep, at, settings.quiet_micros):
        return None
    released = state.holding.released_at
    if released is not None and ep.last_at <= released:
        return None  # H1: after a hold, only a failure since tells of the cluster as it is
    if preemptions.in_progress(state.preemption) or opted_out(state) is not None:
        return None
    found = shortfall_now(state)
    if found is None or not cannot_fit(found[1]):
        return None
    facts, short = found
    length = max(ep.last_at - ep.since, 1_000_000)
    return {"shortfall": facts["shortfall"], "min_member": facts["min_member"],
            "needs": needs_text(short), "waiting_for": waiting_for_text(short),
            "rounds_per_minute": ep.rounds * 60_000_000 // length,
            "events_per_minute": episodes.per_minute(state.storm, at),
            "max_seconds": int(settings.hold_max_seconds)}


def _issue_hold(state: GangState, facts: dict[str, Any], at: int, settings: FoldSettings,
                cycle: int | None, out: list[Output]) -> GangState:
    """Append a ``HoldGang`` for the gang's group (``ttl_seconds``, ``message``) and note it
    in ``state.holding`` (the fold's own copy)."""
    state, cmd = command(state, "HoldGang", None, state.commands.representative or "",
                         "GangCannotFit", at, cycle)
    cmd["ttl_seconds"] = int(settings.hold_ttl_seconds)
    cmd["message"] = held_message(state.gang, facts)
    out.append(cmd)
    h = state.holding
    state.holding = replace(h, renewed_at=at, ids=(h.ids + (cmd["id"],))[-HOLD_IDS:])
    return state


def _release(state: GangState, reason: str, detail: str, at: int, cycle: int | None,
             out: list[Output]) -> GangState:
    """End the hold: a ``ReleaseGang`` (``reason``), and ``GangReleased`` with ``detail`` when
    the shim had applied it (told ``GangHeld``)."""
    h = state.holding
    state, cmd = command(state, "ReleaseGang", None, state.commands.representative or "",
                         reason, at, cycle)
    out.append(cmd)
    if h.applied_at is not None and has_objects(state):
        facts = {"reason": reason, "detail": detail, "since": format_time(h.applied_at),
                 "held_seconds": max(0, at - h.applied_at) // 1_000_000}
        out.append(diagnostic(state, RELEASED, facts, at))
    state.holding = Holding(released_at=at)
    return state


def release_reason(state: GangState, s: Step) -> tuple[str, str] | None:
    """Why the hold ends on record ``s.rec`` (H2, H3), as ``(ReleaseGang reason, detail for
    people)``, or ``None`` while it holds."""
    h, rec = state.holding, s.rec
    if not s.settings.holds:
        return "HoldsOff", "holds were turned off (GANGSTATE_HOLDS=off)"
    who = opted_out(state)
    if who is not None:
        return "HoldsOff", f"holds were turned off for it ({who}: gangstate.io/hold=off)"
    found = shortfall_now(state)
    held_on = h.basis
    if isinstance(rec, (PodObserved, PodGroupObserved)) and held_on:
        spec = state.spec
        min_member = None if spec is None else spec.min_member
        if min_member != held_on[0]:
            return "SpecChanged", f"its minMember changed from {held_on[0]} to {min_member}"
        if len(state.members) != held_on[1] or _uid_digest(state) != held_on[2]:
            return "SpecChanged", f"its members changed ({held_on[1]} -> {len(state.members)})"
    if found is None:
        return None  # the episode says nothing of the room any more: nothing to judge by
    short = found[1]
    if held_on and short.priority != held_on[3]:
        return "PriorityChanged", f"its priority changed from {held_on[3]} to {short.priority}"
    if not cannot_fit(short):
        room = short.room_counting_preemption
        room = short.room if room is None else room
        return "CapacityChanged", (f"the cluster's {short.resource} changed (room for "
                                   f"{min(room, len(short.to_place))} of "
                                   f"{len(short.to_place)} members to place now)")
    return None


def _lost(state: GangState, rec: CycleObserved) -> bool:
    """H4: the shim reports a round opened (or a member's own failure) for the gang after the
    hold was applied and more than ``LOST_HOLD_SECONDS`` after its last ``HoldGang``."""
    h = state.holding
    if not rec.shim or h.applied_at is None or h.renewed_at is None:
        return False
    opened = rec.reason == "RoundOpened" or episodes.is_failure(rec)
    return opened and rec.at > max(h.applied_at, h.renewed_at + LOST_HOLD_SECONDS * 1_000_000)


def _refusal_key(facts: Any) -> str:
    """What a refused hold is remembered by (H5): the digest of its shortfall and minMember,
    not of the figures that change with every round."""
    return facts_digest({"shortfall": facts["shortfall"], "min_member": facts["min_member"]})


def _on_ack(state: GangState, rec: AckObserved, out: list[Output]) -> GangState:
    """An ack of one of the hold's ``HoldGang`` commands: the first ``Applied`` tells
    ``GangHeld``; a refusal ends the hold (H5; a ``ReleaseGang`` when the shim had applied it,
    so that it drops it at once)."""
    h = state.holding
    if h.issued_at is None or rec.command_id not in h.ids:
        return state
    if rec.outcome == "Applied":
        if h.applied_at is None:
            state.holding = replace(h, applied_at=rec.at)
            if has_objects(state):
                out.append(diagnostic(state, HELD, {**h.facts, "since": format_time(rec.at)},
                                      rec.at))
        return state
    why = rec.reason or rec.outcome
    if h.applied_at is not None:
        return _refused(state, why, f"the scheduler shim refused to renew it ({why})", rec.at,
                        out)
    state.holding = Holding(released_at=rec.at, refused=(_refusal_key(h.facts), why))
    return state


def _refused(state: GangState, why: str, detail: str, at: int,
             out: list[Output]) -> GangState:
    """End the hold with ``ReleaseGang`` ``HoldsOff`` (``detail`` for people) and remember
    its facts as refused for ``why`` (H5: not held again)."""
    key = _refusal_key(state.holding.facts)
    state = _release(state, "HoldsOff", detail, at, None, out)
    state.holding = replace(state.holding, refused=(key, why))
    return state


def decide_holding(state: GangState, s: Step, out: list[Output]) -> GangState:
    """Rules H1-H5 on one record: hold the gang (``verdict``), release it (``release_reason``),
    renew a hold the shim lost (``_lost``), or take the shim's ack (``_on_ack``)."""
    rec = s.rec
    if isinstance(rec, AckObserved):
        return _on_ack(state, rec, out)
    h = state.holding
    cycle = rec.cycle if isinstance(rec, CycleObserved) else None
    if h.issued_at is None:
        facts = verdict(state, s.at, s.settings)
        if facts is None or (h.refused is not None and h.refused[0] == _refusal_key(facts)):
            return state
        found = shortfall_now(state)
        assert found is not None  # verdict found it
        state.holding = Holding(issued_at=s.at, facts=facts, basis=basis(state, found[1]),
                                released_at=h.released_at)
        return _issue_hold(state, facts, s.at, s.settings, cycle, out)
    if not state.members:
        state.holding = NO_HOLDING  # the gang is gone: the shim forgets its group
        return state
    why = release_reason(state, s)
    if why is not None:
        return _release(state, why[0], why[1], s.at, cycle, out)
    if isinstance(rec, CycleObserved) and _lost(state, rec):
        return _issue_hold(state, dict(h.facts), s.at, s.settings, cycle, out)
    return state


def hold_due(state: GangState, settings: FoldSettings) -> int | None:
    """When the hold's timer is due (microseconds of event time): its renewal
    (``renewed_at`` + ``hold_renew_seconds``) or its end (``issued_at`` +
    ``hold_max_seconds``), whichever comes first; ``None`` while gangstate does not hold the
    gang."""
    h = state.holding
    if h.issued_at is None or h.renewed_at is None:
        return None
    return min(h.renewed_at + settings.hold_renew_micros,
               h.issued_at + settings.hold_max_micros)


def fire_hold(state: GangState, at: int, settings: FoldSettings
              ) -> tuple[GangState, list[dict[str, Any]]]:
    """The hold's timer at event time ``at``: ``ReleaseGang`` ``HoldExpired`` after
    ``hold_max_seconds``, else the renewal (H4)."""
    out: list[dict[str, Any]] = []
    h = state.holding
    if h.issued_at is None:
        return state, out
    if h.applied_at is None and at >= h.issued_at + settings.hold_ttl_micros:
        # H5: no shim answered the hold within its TTL: nobody applies it; not held again
        return _refused(state, "no ack", "no scheduler shim acked the hold", at, out), out
    if at >= h.issued_at + settings.hold_max_micros:
        state = _release(state, "HoldExpired",
                         f"it was held {_duration(settings.hold_max_micros)}, the longest "
                         f"gangstate holds a gang (GANGSTATE_HOLD_MAX_SECONDS)", at, None, out)
        return state, out
    return _issue_hold(state, dict(h.facts), at, settings, None, out), out


def held_finding(state: GangState) -> dict[str, Any] | None:
    """The hold as a finding (``GangHeld``) while the shim applies it, else ``None``."""
    h = state.holding
    if h.issued_at is None or h.applied_at is None:
        return None
    facts = {**h.facts, "since": format_time(h.applied_at)}
    return {"reason": HELD.name, "type": HELD.type, "message": HELD.message(state.gang, facts),
            "facts": facts, "since": facts["since"]}


def findings(state: GangState) -> list[dict[str, Any]]:
    """``held_finding`` as the family's findings of ``describe gang`` (``[]`` or one)."""
    return listed(held_finding(state))


def why(state: GangState, member: Member) -> dict[str, Any] | None:
    """Why ``member`` is pending while gangstate holds its gang: the scheduler shim refuses
    every member of the gang group at PreEnqueue (docs/shim.md), with ``GangHeld``; ``None``
    while gangstate does not hold it."""
    found = held_finding(state)
    if found is None:
        return None
    return {"held_at": "PreEnqueue", "held_by": "gangstate's HoldGang, applied by the scheduler "
                                                "shim",
            "reasons": [reason_of(found)], "unblock": [HELD.unblock_text(state, found["facts"])]}


TIMER: TimerRule = TimerRule("hold", "hold renewed or ended", hold_due, fire_hold)
DECISION: Decision = Decision("holding", decide_holding)
RULE: Rule = Rule("holding", (HELD, RELEASED), (TIMER,), (DECISION,), findings, why)
