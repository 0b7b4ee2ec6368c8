"""Members lost after the gang was scheduled (pure rules): ``GangMembersLost`` and
``GangMembersRestored``.

Where it sits: the functional core, below the rule families. ``streams.core.rules.lost`` (the
family: the reasons and their messages) calls ``track_losses`` on every record (after the fold
applied it) and emits from ``lost_facts``/``restored_facts``; the fold fires the settling
timer (``lost_due``, through the family's ``TimerRule``).

Why (upstream: "a gang dropped below minCount looks healthy", kubernetes/enhancements#6413):
once a gang was scheduled, koord-scheduler v1.8.0 does nothing about a member that goes away.
K = ``koordinator@v1.8.0/pkg/scheduler/plugins/coscheduling/``:

- a deleted pod is only dropped from its gang's children (K ``core/gang_cache.go:189-220``,
  ``core/gang.go:278-302``); an update of a pod that has terminated (phase ``Failed``) is
  ignored by the gang cache (K ``core/gang_cache.go:182-184``, rule S31). Nothing in
  Coscheduling evicts or deletes the members that remain, or brings the gang back to a
  gathering state: the group stays ``OnceResourceSatisfied`` (K ``core/ganggroup.go:29-32,
  94-100``, rule M2) while a gang of it lives;
- a replacement pod (created by the member's controller, e.g. a Job) meets the gang checks
  according to the gang's match policy: ``once-satisfied`` (the default) skips every gang
  check once the group was satisfied (K ``core/core.go:213-216,301-304,372-374``,
  ``core/gang.go:567-568``, rule P4), so each replacement is scheduled on its own as soon as
  it fits; ``waiting-and-running`` lets a replacement through Permit when the members
  waiting and bound reach minMember (K ``core/gang.go:565-566``); ``only-waiting`` counts
  the members waiting at Permit only (K ``core/gang.go:563-564``), so replacements fewer
  than minMember wait out the waiting time and are rejected;
- a pod with no controller (a bare pod) is created again by no one.

A loss is a member that was bound and had not finished (phase not ``Succeeded``/``Failed``)
and is then deleted (a ``DELETED`` record: by a user, by its controller, by an eviction, or by
kube-controller-manager's pod GC after its node was deleted; the record does not tell which)
or fails (phase ``Failed``, with the pod's ``status.reason`` when it has one, ``Evicted`` for
a kubelet eviction). A member that ``Succeeded`` is not lost (a job that finished).

The gang is short when it was scheduled (``GangState.ever_scheduled``) and fewer than
minMember members are still bound and not failed (``kept``; a finished member counts, a
terminating one counts until it is gone). The warning waits ``LOST_SETTLE_SECONDS`` of event
time after the latest loss, and is said only if some member is still alive then (not
terminating and not terminated): deleting a whole job (its pods deleted one after another, or
its PodGroup deleted with them) is not a loss. It ends with a Normal ``GangMembersRestored``
once minMember members are bound again (a loss told should be seen to end: a Warning Event
stays listed for an hour).

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .records import CycleObserved, GangRecord, PodGroupObserved, PodObserved
from .state import NO_LOSS, Lost

if TYPE_CHECKING:
    from .state import GangState, Member

LOST_SETTLE_SECONDS = 5
"""Event time after the latest loss before ``GangMembersLost`` is said: a whole job's pods
are deleted one after another (kube-controller-manager's garbage collector), and within this
time the others are terminating or gone too, which is no loss."""
TERMINATED = ("Succeeded", "Failed")


def kept(m: "Member") -> bool:
    """A member that still holds its place in a scheduled gang: bound and not ``Failed``
    (``Succeeded`` counts: it finished its work; a terminating one counts until deleted)."""
    return m.node is not None and m.phase != "Failed"


def loss_of(before: "GangState", state: "GangState", rec: GangRecord) -> str | None:
    """How ``rec`` lost a member of the gang, or ``None``: ``"deleted"`` for the ``DELETED``
    record of a member that was bound and not terminated, ``"failed"`` (``"failed
    (Evicted)"`` with the pod's ``status.reason``) for a bound member whose phase became
    ``Failed``."""
    if not isinstance(rec, PodObserved):
        return None
    old = before.members.get(rec.uid)
    if old is None or old.node is None or old.phase in TERMINATED:
        return None
    new = state.members.get(rec.uid)
    if new is None:
        return "deleted" if rec.type == "DELETED" else None
    if new.phase == "Failed":
        return f"failed ({rec.status_reason})" if rec.status_reason else "failed"
    return None


def count_kept(state: "GangState") -> int:
    """How many members hold their place (``kept``): those bound less those bound whose pod
    failed (``GangState.bound - GangState.failed_bound``, two counters: O(1))."""
    return state.bound - state.failed_bound


def track_losses(before: "GangState", state: "GangState", rec: GangRecord,
                 at: int) -> "GangState":
    """Remember the members ``rec`` lost (``GangState.lost``, a ``Lost`` part: ``(name, cause, at)``) while the
    gang was scheduled, and forget them all once the gang has minMember kept members again,
    no member or no spec (a gang deleted, or its PodGroup). Assigns fields of ``state`` (the
    fold's own copy) and returns it."""
    if not isinstance(rec, (PodObserved, PodGroupObserved, CycleObserved)):
        return state
    spec = state.spec
    cause = loss_of(before, state, rec) if before.ever_scheduled else None
    if cause is not None and spec is not None:
        name = before.members[rec.uid].name  # type: ignore[union-attr]
        state.lost = Lost(state.lost.entries + ((name, cause, at),), False)
    if state.lost.entries and (spec is None or not state.members
                       or count_kept(state) >= spec.min_member):
        state.lost = NO_LOSS
    return state


def lost_facts(state: "GangState") -> dict[str, Any] | None:
    """The facts of ``GangMembersLost``: ``lost`` (member name -> how: ``deleted``,
    ``failed``, ``failed (Evicted)``), ``remaining`` (members bound and not failed),
    ``min_member`` and ``match_policy``; ``None`` when no loss leaves the gang short, or when
    no member is alive any more (a whole job going away says nothing)."""
    spec = state.spec
    if not state.lost.entries or spec is None:
        return None
    remaining = count_kept(state)
    if remaining >= spec.min_member or not any(m.alive for m in state.members.values()):
        return None
    return {"lost": {name: cause for name, cause, _ in state.lost.entries}, "remaining": remaining,
            "min_member": spec.min_member, "match_policy": spec.match_policy}


def lost_due(state: "GangState") -> int | None:
    """When ``GangMembersLost`` is due (microseconds of event time): ``LOST_SETTLE_SECONDS``
    after the latest loss not yet told, while ``lost_facts`` holds; else ``None``."""
    if not state.lost.entries or state.lost.told or lost_facts(state) is None:
        return None
    return max(at for _, _, at in state.lost.entries) + LOST_SETTLE_SECONDS * 1_000_000


def restored_facts(before: "GangState", state: "GangState") -> dict[str, Any] | None:
    """The facts of ``GangMembersRestored`` (``bound``: members bound and not failed,
    ``min_member``) when the losses ``before`` remembered have ended because the gang has
    minMember such members again (not because it went away); else ``None``. The caller asks
    only while a ``GangMembersLost`` it told has not ended."""
    spec = state.spec
    if state.lost.entries or not before.lost.entries or spec is None or not state.members:
        return None
    kept_now = count_kept(state)
    if kept_now < spec.min_member:
        return None
    return {"bound": kept_now, "min_member": spec.min_member}
