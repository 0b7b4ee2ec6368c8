"""Retention: when a gang is gone from the gang table, and what of it is kept.

Where it sits: the functional core, beside the fold. ``PartitionFold`` (``streams.core.fold``)
asks ``gone_at`` when it stores a gang and, once its clock passes that time and the gang has no
pending timer, replaces the gang by ``remnant(state)``: nothing (the gang id is deleted from the
table; the worker writes a changelog tombstone) or, for a gang group that issued commands, the
few fields that must outlive it. Without this, every gang ever seen stayed in the table
(~25 KB per 8-member gang; docs/benchmarks.md, "Churn").

A gang is **gone** when (docs/contracts.md, "Gangs removed from the table"):
- it has no live member pod, no orphan pod (a pod Koordinator dropped with its PodGroup,
  ``GangState.orphans``) and no PodGroup (deleted as Koordinator deletes it, or never more
  than peers' summaries or acks), and
- nothing happened to it for the deleted-uid memory window (``FoldSettings.
  tombstone_seconds``, 600 s of event time) after the latest of its last record
  (``GangState.clock``), its deletion and its deleted uids' deletions: a late, stale event of
  a deleted pod can no longer revive it (``fold.apply_pod``), and
- no timer is pending (``fold.next_due`` is ``None``) and no peer summary is held back.

What is kept: nothing when the gang group never issued a command (``epoch`` 0). Otherwise the
epoch, which must never go back (the shim fences commands by it, contracts.md
``gangstate.command/v1``), with ``deleted_at``/``deleted_by``: a remnant of a few dozen bytes,
which stays. Forgotten with the rest: the diagnostics the gang emitted (a replay of the same
records after the window emits them again, with the same ids), its history and its peers'
last summaries (a gang of a gang group asks its peers again when it is held, as a new gang
does).

Must not: read the clock, do I/O, or import anything outside the standard library and
``streams.core``.
"""

from __future__ import annotations

from .state import Commands, GangState


def gone_at(state: GangState, window_micros: int) -> int | None:
    """The event time (microseconds) from which ``state`` is gone if nothing else happens to
    it: the latest of its clock, ``deleted_at`` and its deleted uids' deletion times, plus
    ``window_micros``. ``None`` while the gang exists (a live member or a PodGroup) or has
    orphan pods, and for a remnant (``remnant``), which is kept."""
    if state.members or state.orphans or state.podgroup is not None:
        return None
    if state.commands.epoch and state == remnant(state):
        return None
    latest = state.clock
    if state.deleted_at is not None and state.deleted_at > latest:
        latest = state.deleted_at
    for _rv, at in state.tombstones.values():
        if at > latest:
            latest = at
    return latest + window_micros


def is_gone(state: GangState, now: int, window_micros: int, next_timer: int | None) -> bool:
    """True when ``state`` is gone at event time ``now`` (microseconds): ``gone_at`` has
    passed, no timer is pending (``next_timer``, the caller's ``fold.next_due(state)``, is
    ``None``) and no peer summary is held back (``deferred``)."""
    due = gone_at(state, window_micros)
    return due is not None and due <= now and next_timer is None and not state.group.deferred


def remnant(state: GangState) -> GangState | None:
    """What the table keeps of a gone gang: ``None`` (nothing) when its gang group never
    issued a command (``epoch`` 0); otherwise a state with only the gang id, the clock, the
    ``epoch`` and ``deleted_at``/``deleted_by`` (phase ``Deleted`` when it was deleted)."""
    if not state.commands.epoch:
        return None
    return GangState(gang=state.gang, clock=state.clock,
                     commands=Commands(epoch=state.commands.epoch),
                     deleted_at=state.deleted_at, deleted_by=state.deleted_by)
