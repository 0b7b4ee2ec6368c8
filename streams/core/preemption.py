"""Preemption for a gang: victims evicted for its members, waited for, or evicted in vain
(pure rules).

Where it sits: the functional core. ``streams.core.fold`` folds ``gangstate.preemption/v1``
records (``records.PreemptionObserved``: a victim preempted for a member, a victim gone), the
members' ``status.nominatedNodeName`` (``PodObserved.nominated_node``) and the preemption
clause of failed attempts (``CycleObserved.preemption``) into the gang's ``Preemption``
(``apply_record``, ``note_pod``, ``note_attempt``); the rule family
``streams.core.rules.preemption`` (the reasons and their messages) emits ``GangPreempting`` and
``GangPreemptionWasted`` from ``preempting_facts`` and ``wasted_facts`` when ``due``, and
holds back ``GangUnschedulable`` while a preemption is under way (``unschedulable_after``);
``streams.core.explain`` answers from the same facts.

Rules (KS = kubernetes v1.35.2 ``pkg/scheduler/``, K = koordinator v1.8.0
``pkg/scheduler/plugins/coscheduling/``; docs/koordinator-rules.md, rules PR1-PR5):

- PR1: kube-scheduler's DefaultPreemption (a PostFilter plugin) preempts for one pod at a
  time: it marks each victim ``DisruptionTarget`` (reason ``PreemptionByScheduler``), deletes
  it with its grace period and writes a ``Preempted`` Event on it, ``Preempted by pod <preemptor
  uid> on node <node>`` (KS ``framework/preemption/preemption.go:186-216``); the preemptor gets
  the node as ``status.nominatedNodeName``. Koordinator's own gang-aware (job) preemption is
  Coscheduling's PostFilter, off by default (``EnablePreemption`` false, K
  ``core/core.go:344-347``, ``pkg/scheduler/apis/config/v1/defaults.go:52``), so on v1.8.0
  the preemption a gang gets is per pod, not per gang.
- PR2: while a victim evicted for the pod is still terminating on the pod's nominated node,
  the pod is not eligible to preempt again (KS ``framework/plugins/defaultpreemption/
  default_preemption.go:317-337,355-366``): its attempts fail with ``preemption: not eligible
  due to a terminating pod on the nominated node.`` (Koordinator's job preemption writes ``not
  eligible due to terminating pod on the nominated node.``, K ``core/preemption.go:37``). The
  gang waits for its victims; it is not short of capacity and needs no smaller minMember.
  Measured on the real scheduler: once the victims are gone the gang binds in under 1 s.
- PR3: the ``preemption: `` prefix of a PostFilter message (KS ``framework/plugins/
  defaultpreemption/default_preemption.go:126-130``, K ``core/core.go:350-355``); ``No
  preemption victims found for incoming pod`` on every node (KS ``default_preemption.go:
  244-247``) means no lower-priority pod is left on any node: the victims are gone from the
  scheduler's cache (a terminating pod still counts as a possible victim there).
- PR6: preemption is not gang-aware (PR1): a gang that needs more than the cluster has can
  make the scheduler evict pods it cannot use. Victims all gone, and the gang still failing
  ``GONE_SETTLE_SECONDS`` later (or failing with no victims left, PR3): the preemption was
  wasted, told on the gang's pods and on the victims.
- PR7: koord-scheduler v1.8.0 may not try the gang again once its victims are gone: a member
  that Coscheduling rejected (PreFilter, while its peer preempted) waits in the unschedulable
  pods, which no cluster event moves for Coscheduling (K ``coscheduling.go:109-112``), until
  kube-scheduler's flush, up to 5 minutes (``DefaultPodMaxInUnschedulablePodsDuration``, KS
  ``backend/queue/scheduling_queue.go:66``), and the others are refused at PreEnqueue behind it
  (``representative ... already exists``; seen on the real scheduler about one run in five).
  No attempt ``GONE_SETTLE_SECONDS`` after the last victim was gone: told as
  ``GangAwaitingRetry`` (``stalled_due``), with no stale ``GangUnschedulable`` meanwhile.
- PR5: a victim waiting at Permit is rejected, not deleted (KS ``preemption.go:180-183``):
  nothing to wait for (``PreemptionObserved.bound`` false: gone at once).

Must not: read the clock, do I/O or import infrastructure. Values are immutable.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .episode import Episode, is_failure
from .records import CycleObserved, PodObserved, PreemptionObserved
from .timefmt import format_time

SETTLE_SECONDS = 1.0
"""``GangPreempting`` is told this long (event time) after the latest victim was preempted:
the scheduler preempts for each member in turn, within about a second (measured), so one
preemption is told once, not once per victim."""
GONE_SETTLE_SECONDS = 5.0
"""How long after its last victim was gone a gang still failing counts as wasted preemption
(PR6): on the real scheduler a gang whose victims are gone binds in under 1 s."""
MAX_VICTIMS = 32
"""Victims a gang keeps (the latest); a message names at most ``rules.preemption.NAMES_SHOWN``
of them."""
NEVER = 1 << 62
"""``unschedulable_after``'s "not while this lasts" (no event time comes this late)."""
TERMINATING_CLAUSES = ("not eligible due to a terminating pod on the nominated node",
                       "not eligible due to terminating pod on the nominated node")
"""PR2: kube-scheduler's text, and Koordinator's job preemption's."""


class Victim(NamedTuple):
    """One pod preempted for a member of the gang: ``pod`` ``ns/name``, ``uid``, ``node`` it
    was preempted on, ``preemptor`` the member's ``ns/name``, ``preempted_at`` the time of its
    ``Preempted`` Event (the Event's own time when the record carries it, else the record's
    event time; microseconds), ``grace_seconds`` its grace period when known,
    ``gone_at`` when it was known gone (``None`` while terminating), ``seen_at`` the event time
    of the record that told of it (the fold's clock: the timers count from it, never from the
    Event's own time, which is the scheduler's)."""

    pod: str
    uid: str
    node: str
    preemptor: str
    preempted_at: int
    grace_seconds: int | None
    gone_at: int | None = None
    seen_at: int = 0


class Preemption(NamedTuple):
    """What a gang knows of the preemption for it: ``victims`` (oldest first, at most
    ``MAX_VICTIMS``), ``nominated`` ``((member name, node), ...)`` sorted (the members'
    ``status.nominatedNodeName``), ``clause`` the preemption clause of its latest failed attempt
    that had one (``CycleObserved.preemption``) and ``clause_at`` its time,
    ``told_upto`` the latest ``seen_at`` the last ``GangPreempting`` told of (a victim
    gone is no news: only a new victim makes it told again), ``wasted_at``
    when ``GangPreemptionWasted`` was told (``None``: not for these victims), ``tried_at``
    the event time of the gang's latest scheduling attempt record (any member, any stage:
    ``note_tried``; ``None`` before one) and ``stalled_at`` when ``GangAwaitingRetry`` was told
    for these victims (PR7, ``stalled_due``; ``None``: not told)."""

    victims: tuple[Victim, ...] = ()
    nominated: tuple[tuple[str, str], ...] = ()
    clause: str | None = None
    clause_at: int | None = None
    told_upto: int | None = None
    wasted_at: int | None = None
    tried_at: int | None = None
    stalled_at: int | None = None


def _settle(seconds: float) -> int:
    return int(seconds * 1_000_000)


def _name(pod: str) -> str:
    return pod.split("/", 1)[1] if "/" in pod else pod


def apply_record(p: Preemption | None, rec: PreemptionObserved) -> Preemption | None:
    """``p`` after a ``gangstate.preemption/v1`` record: a ``Preempted`` victim not known yet
    is added (gone at once when it was not bound, PR5), a ``Deleted`` one marks a known victim
    gone. Returns ``p`` itself when nothing changes (a repeat, an unknown victim's deletion).
    Pure."""
    victims = p.victims if p is not None else ()
    known = [i for i, v in enumerate(victims) if v.uid == rec.victim_uid]
    if rec.type == "Deleted":
        if not known or victims[known[0]].gone_at is not None or p is None:
            return p
        i = known[0]
        return p._replace(victims=victims[:i] + (victims[i]._replace(gone_at=rec.at),)
                          + victims[i + 1:])
    if known:
        return p
    victim = Victim(rec.victim, rec.victim_uid, rec.node, rec.preemptor,
                    rec.at if rec.event_at is None else rec.event_at, rec.grace_seconds,
                    None if rec.bound else rec.at, rec.at)
    base = p if p is not None else Preemption()
    return base._replace(victims=(victims + (victim,))[-MAX_VICTIMS:], wasted_at=None,
                         stalled_at=None)


def note_pod(p: Preemption | None, rec: PodObserved) -> Preemption | None:
    """``p`` with member ``rec.name``'s nominated node as its Pod now says (removed when unset
    or the pod deleted). Returns ``p`` itself when unchanged. Pure."""
    node = None if rec.type == "DELETED" else rec.nominated_node
    current = dict(p.nominated) if p is not None else {}
    if current.get(rec.name) == node:
        return p
    if node is None:
        current.pop(rec.name, None)
    else:
        current[rec.name] = node
    return (p if p is not None else Preemption())._replace(
        nominated=tuple(sorted(current.items())))


def note_attempt(p: Preemption | None, rec: CycleObserved) -> Preemption | None:
    """``p`` after a failed attempt whose message has a preemption clause
    (``rec.preemption``): the clause is kept, and ``no-victims`` (PR3) marks every victim
    preempted before it gone. Returns ``p`` itself otherwise. Pure."""
    if rec.preemption is None or not is_failure(rec):
        return p
    base = p if p is not None else Preemption()
    victims = base.victims
    if rec.preemption == "no-victims":
        victims = tuple(v._replace(gone_at=rec.at)
                        if v.gone_at is None and v.seen_at <= rec.at else v
                        for v in victims)
    if base.clause == rec.preemption and base.clause_at is not None \
            and base.clause_at >= rec.at and victims == base.victims:
        return p
    return base._replace(victims=victims, clause=rec.preemption,
                         clause_at=max(rec.at, base.clause_at or rec.at))


def note_tried(p: Preemption | None, at: int) -> Preemption | None:
    """``p`` after a scheduling attempt record of any of the gang's members at event time
    ``at`` (any stage and status: the scheduler is trying the gang): ``tried_at`` moves on.
    ``None`` stays ``None`` (nothing preempted, nothing to compare with). Pure."""
    if p is None or (p.tried_at is not None and p.tried_at >= at):
        return p
    return p._replace(tried_at=at)


def untried_since_gone(p: Preemption | None) -> int | None:
    """When the last victim was gone (``last_gone``) if no attempt of the gang came at or after
    it (``tried_at``) and the preemption is not in progress: the scheduler has not tried the
    gang since its preemption made room (PR7); else ``None``."""
    if p is None or in_progress(p):
        return None
    gone = last_gone(p)
    if gone is None or (p.tried_at is not None and p.tried_at >= gone):
        return None
    return gone


def stalled_due(p: Preemption | None) -> int | None:
    """When ``GangAwaitingRetry`` is due (PR7), not yet told for these victims: every victim
    gone, no attempt since (``untried_since_gone``) and no waste told,
    ``GONE_SETTLE_SECONDS`` after the last was gone (a gang whose preemption worked binds
    within a second of it); ``None`` otherwise."""
    gone = untried_since_gone(p)
    if p is None or gone is None or p.wasted_at is not None or p.stalled_at is not None:
        return None
    return gone + _settle(GONE_SETTLE_SECONDS)


def terminating(p: Preemption | None) -> tuple[Victim, ...]:
    """The victims still terminating (not known gone)."""
    return () if p is None else tuple(v for v in p.victims if v.gone_at is None)


def last_gone(p: Preemption) -> int | None:
    """When the last victim was gone, when every victim is (``None`` otherwise or without
    victims)."""
    if not p.victims or any(v.gone_at is None for v in p.victims):
        return None
    return max(v.gone_at or 0 for v in p.victims)


def in_progress(p: Preemption | None) -> bool:
    """True while the gang waits for its preemption (PR2): a victim still terminating, or
    its latest failed attempt saying ``victims-terminating`` (the ``Preempted`` Events may
    come late: koord-scheduler throttles its Event writes) since its last victim was gone."""
    if p is None:
        return False
    if terminating(p):
        return True
    gone = last_gone(p)
    return p.clause == "victims-terminating" and p.clause_at is not None \
        and (gone is None or p.clause_at > gone)


def unschedulable_after(p: Preemption | None) -> int | None:
    """Not before when (event time) the gang's ``GangUnschedulable`` may be told, as far as
    preemption is concerned: ``NEVER`` while it is in progress (``in_progress``) and while the
    gang was not tried since its last victim was gone (``untried_since_gone``: its failures are
    from before the room was made; ``GangAwaitingRetry`` tells it, PR7), the last victim's gone
    time plus ``GONE_SETTLE_SECONDS`` after it (the gang binds within a second when the
    preemption worked), ``None`` when preemption has no say (none, or its waste told).
    """
    if p is None or p.wasted_at is not None:
        return None
    if in_progress(p) or untried_since_gone(p) is not None:
        return NEVER  # PR7: no attempt since the victims went, nothing new to tell of fit
    gone = last_gone(p)
    return None if gone is None else gone + _settle(GONE_SETTLE_SECONDS)


def _victim_fact(v: Victim) -> dict[str, Any]:
    return {"pod": v.pod, "uid": v.uid, "node": v.node, "for": _name(v.preemptor),
            "preempted_at": format_time(v.preempted_at), "grace_seconds": v.grace_seconds}


def preempting_facts(p: Preemption | None, min_member: int | None) -> dict[str, Any] | None:
    """The compared facts of ``GangPreempting``: ``victims`` (the terminating ones, oldest
    first: ``pod`` ns/name, ``uid``, ``node``, ``for`` the member's name, ``preempted_at`` RFC
    3339, ``grace_seconds`` or ``None``), ``min_member``; ``None`` when none is terminating.
    The members' nominated nodes are shown (``nominated``) but not compared."""
    victims = terminating(p)
    if not victims:
        return None
    return {"victims": [_victim_fact(v) for v in victims], "min_member": min_member}


def preempting_due(p: Preemption | None) -> int | None:
    """When ``GangPreempting`` is due: ``SETTLE_SECONDS`` after the latest terminating victim
    was seen (``Victim.seen_at``), when that victim is newer than those last told of
    (``told_upto``): a victim
    gone changes nothing told (the gang binds, or ``GangPreemptionWasted`` follows)."""
    victims = terminating(p)
    if p is None or not victims:
        return None
    latest = max(v.seen_at for v in victims)
    if p.told_upto is not None and latest <= p.told_upto:
        return None
    return latest + _settle(SETTLE_SECONDS)


def wasted_due(p: Preemption | None, episode: Episode | None, rec_at: int | None = None
               ) -> int | None:
    """When ``GangPreemptionWasted`` is due (PR6), not yet told: every victim gone and a failed
    attempt after that (the episode's last failure, or ``rec_at``, a failed attempt now):
    ``GONE_SETTLE_SECONDS`` after the last was gone, at once when the latest clause said
    ``no-victims`` after it; ``None`` otherwise, and while the preemption is in progress
    (``in_progress``: a late FailedScheduling Event still saying ``victims-terminating``)."""
    if p is None or p.wasted_at is not None or episode is None or not episode.unfit \
            or in_progress(p):
        return None
    gone = last_gone(p)
    failed = max(episode.last_at, rec_at or 0)
    if gone is None or failed < gone:
        return None
    if p.clause == "no-victims" and p.clause_at is not None and p.clause_at >= gone:
        return p.clause_at
    return gone + _settle(GONE_SETTLE_SECONDS)


def wasted_facts(p: Preemption, episode: Episode, min_member: int | None,
                 bound: int) -> dict[str, Any]:
    """The facts of ``GangPreemptionWasted``: ``victims`` (every victim, as in
    ``preempting_facts``, with ``gone_at``), ``min_member``, ``bound``, ``fit`` (most members
    that fit at once in the failure episode), and with the cluster's room known
    (``episode.capacity``) ``shortfall``: ``resource``, ``request`` (one member's),
    ``allocatable``, ``nodes`` (milli-units)."""
    facts: dict[str, Any] = {
        "victims": [{**_victim_fact(v), "gone_at": None if v.gone_at is None
                     else format_time(v.gone_at)} for v in p.victims],
        "min_member": min_member, "bound": bound, "fit": episode.fit}
    cap = episode.capacity
    if cap is not None:
        facts["shortfall"] = {"resource": cap.resource, "request": cap.request,
                              "allocatable": cap.allocatable, "nodes": cap.nodes}
    return facts


def victims_involved(p: Preemption) -> list[dict[str, str]]:
    """The victims as ``involved`` objects of a diagnostic (``kind`` Pod, ``namespace``,
    ``name``, ``uid``), oldest first."""
    out = []
    for v in p.victims:
        ns, _, name = v.pod.partition("/")
        out.append({"kind": "Pod", "namespace": ns, "name": name, "uid": v.uid})
    return out
