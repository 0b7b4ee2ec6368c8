"""The fold: ``step(state, record) -> (state, outputs)`` and the event-time timers.

Where it sits: the heart of the functional core. ``apply`` folds one record into a gang's state
(one named function per record kind); ``streams.core.decide`` turns the new state into
diagnostics and commands; ``fire_timers`` emits what became due by a given event time;
``PartitionFold`` drives all three over one ordered input log with one event-time clock, exactly
as one Kafka partition of ``gang-events`` is processed by the worker, and as the whole trace is
processed by ``gangstate fold``.

Must not: read the wall clock, draw random numbers or uuids, do I/O, or import Faust, Kafka or
Kubernetes. Same records in, same state and outputs out (contracts.md, "Time is an input").
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from typing import Callable, Iterable, Mapping, MutableMapping

from . import decide, episode, preemption, retention, rules
from .settings import FoldSettings as FoldSettings, Output as Output
from .records import (FAILED_STATUSES, GANG_CHECK_REASONS, HELD_BY_GANGSTATE, AckObserved,
                      CycleObserved,
                      GangRecord, GangSummarized,
                      PodGroupObserved, PodObserved, PreemptionObserved, Record,
                      RosterObserved, Tick, CapacityObserved)
from .cluster import DEFAULT_CLUSTER, key_of, split_key
from .native import is_native, quiet_micros
from .state import (GangState, HistoryEntry, Peer, PodGroupInfo, cycle_key, new_member,
                    spec_and_fallbacks)

TERMINATED_PHASES = ("Succeeded", "Failed")
"""Pod phases of a terminated pod (Koordinator ``pkg/util`` ``IsPodTerminated``)."""

RECENT_CYCLES = 64
RECENT_ACKS = 32
SHIM_PREFERRED_SECONDS = 60
"""While a gang's last record of the scheduler shim is at most this old (event time), records
derived from scheduler Events are not folded (only the room for the short resource they carry,
``capacity``, is kept): the shim reports the same attempts from inside
the scheduler, with cycle numbers. Past it (the shim stopped, or the scheduler runs without
it), Events are folded again."""


def rv_newer(new: str, old: str) -> bool:
    """True when resourceVersion ``new`` is newer than ``old``.

    resourceVersions of one uid compare as integers (etcd-backed API servers); when either does
    not parse as an integer, a different value counts as newer (contracts.md, "Members and
    versions").
    """
    if new.isdigit() and old.isdigit():
        return int(new) > int(old)
    return new != old


def new_state(key: str) -> GangState:
    """The state of the gang of ``key`` (its id, or ``<cluster>:<id>``: ``cluster.split_key``)
    nothing is known about yet (Koordinator: a new gang before init is Strict,
    once-satisfied, a group of itself, not initialised)."""
    cluster, gang = split_key(key)
    return GangState(gang=gang, cluster=cluster)


# -- apply: one function per record kind -----------------------------------------------------

def apply_pod(state: GangState, rec: PodObserved, settings: FoldSettings) -> GangState:
    """Fold a Pod watch event. Stale or duplicate events (resourceVersion not newer for the uid,
    or an event for a recently deleted uid) return ``state`` unchanged; a ``DELETED`` is applied
    unless its resourceVersion is older than the one held. Members are keyed by uid, so a pod
    recreated with the same name is a new member (Koordinator issue #2148). A gang without a
    PodGroup is deleted with its last pod (``gang_deleted``); a pod of a deleted gang brings it
    back. A member keeps the names of its scheduling gates (``PodObserved.gates``). Any change
    is made on a copy (``state`` itself is never changed).

    Koordinator v1.8.0 rules (K = ``pkg/scheduler/plugins/coscheduling/``):

    - S31: an update (``MODIFIED``) of a terminated pod (phase ``Succeeded`` or ``Failed``) is
      ignored by the gang cache (K ``core/gang_cache.go:182-184``): it cannot initialise the
      gang, bring back a pod dropped with its PodGroup, or make the group once satisfied.
      gangstate still records the pod's new phase (it is no longer pending).
    - M2: a pod with ``spec.nodeName`` on add or update is a bound child and makes the gang
      group ``OnceResourceSatisfied`` (K ``core/gang_cache.go:150-152``,
      ``core/gang.go:489-507``), irreversibly while the gang lives (``once_satisfied``).
    - M5: a pod dropped with its PodGroup (``orphans``) becomes a child again with its next
      event, of the gang as it is then (K ``core/gang_cache.go:124-149``); its deletion only
      forgets it."""
    tombstones = _pruned_tombstones(state, rec.at, settings)
    member = state.members.get(rec.uid)
    terminated_update = rec.type == "MODIFIED" and rec.phase in TERMINATED_PHASES
    orphan = state.orphans.get(rec.uid)
    if orphan is not None and member is None:
        if rec.type == "DELETED":
            if rec.resource_version != orphan.rv \
                    and not rv_newer(rec.resource_version, orphan.rv):
                return state
            new = state.copy()
            new.orphans = {u: m for u, m in state.orphans.items() if u != rec.uid}
            new.tombstones = {**tombstones, rec.uid: (rec.resource_version, rec.at)}
            return new
        if not rv_newer(rec.resource_version, orphan.rv):
            return state  # a relist of the same version is no event for the gang cache
        new = state.copy()
        if terminated_update:  # the gang cache ignores it (S31): still an orphan
            new.orphans = {**state.orphans, rec.uid: orphan._replace(
                rv=rec.resource_version, node=rec.node, phase=rec.phase,
                terminating=rec.terminating)}
            return new
        new.orphans = {u: m for u, m in state.orphans.items() if u != rec.uid}
        return apply_pod(new, rec, settings)
    if rec.type == "DELETED":
        if member is None or (rec.resource_version != member.rv
                              and not rv_newer(rec.resource_version, member.rv)):
            if member is None and rec.uid not in tombstones:
                tombstones = {**tombstones, rec.uid: (rec.resource_version, rec.at)}
            if tombstones is state.tombstones:
                return state
            new = state.copy()
            new.tombstones = tombstones
            return new
        new = state.copy()
        new.drop_member(rec.uid)
        new.tombstones = {**tombstones, rec.uid: (rec.resource_version, rec.at)}
        if new.commands.representative == f"{rec.namespace}/{rec.name}":
            new.commands = replace(new.commands, representative=None)
        if not new.members and new.podgroup is None:
            gang_deleted(new, rec.at, f"Pod/{rec.name}")
        return new

    if member is not None and not rv_newer(rec.resource_version, member.rv):
        return state
    gone = tombstones.get(rec.uid)
    if gone is not None and rec.resource_version != gone[0] \
            and not rv_newer(rec.resource_version, gone[0]):
        # older than its deletion; the very version a roster deleted it at comes back when
        # the pod still exists (a real DELETED is of a newer version than any live one)
        return state
    if gone is not None:
        tombstones = {uid: v for uid, v in tombstones.items() if uid != rec.uid}
    if member is None:
        updated = new_member(rec.name, rec.resource_version, rec.node, rec.phase,
                             rec.terminating, rec.settings, rec.waits_for_podgroup, None, None,
                             "", None, rec.gates, None)
    else:
        # an update re-runs no PreEnqueue for a pod Coscheduling refused (it registers no
        # queueing hint, KS backend/queue/scheduling_queue.go:1062-1082,456-501): still refused
        updated = new_member(rec.name, rec.resource_version, rec.node, rec.phase,
                             rec.terminating,
                             member.settings if member.settings == rec.settings
                             else rec.settings,
                             rec.waits_for_podgroup, member.stage, member.status, member.reason,
                             member.cycle,
                             member.gates if member.gates == rec.gates else rec.gates,
                             member.refused_at)
    new = state.copy()
    new.put_member(rec.uid, updated)
    new.tombstones = tombstones
    new.deleted_at = new.deleted_by = None
    if updated.node is not None and (member is None or member.node is None):
        new.episode = None  # a member bound: the failure episode has ended
    if updated.node is not None and not terminated_update:
        new.once_satisfied = True
    if new.spec_source is None and new.podgroup is None and not rec.waits_for_podgroup \
            and not terminated_update:
        source = f"Pod/{rec.name}"
        spec, _ = spec_and_fallbacks(new.gang, source, rec.settings)
        if spec is not None:
            new.spec_source, new.spec_settings = source, rec.settings
    return new


def apply_podgroup(state: GangState, rec: PodGroupObserved) -> GangState:
    """Fold a PodGroup watch event: every add or update re-initialises the gang from the
    PodGroup (Koordinator ``core/gang.go`` ``tryInitByPodGroup``; a native PodGroup's spec by
    ``native.native_spec``). A delete of a native PodGroup leaves its pods members of the
    gang, not initialised (NG2). A delete of Koordinator's removes the gang
    with all its children (rule M5, Koordinator v1.8.0 ``pkg/scheduler/plugins/coscheduling/
    core/gang_cache.go:295-310``): the pods that remain become ``orphans``, unknown to the gang
    cache until their next event (``apply_pod``), and the gang is deleted (``gang_deleted``).
    A PodGroup created again starts a gang with no children (``core/gang_cache.go:225-235``).
    Any change is made on a copy."""
    old = state.podgroup
    if rec.type == "DELETED":
        if old is None or old.uid != rec.uid:
            return state
        new = state.copy()
        new.podgroup = None
        if new.spec_source and new.spec_source.startswith("PodGroup/"):
            new.spec_source = new.spec_settings = None
        if is_native(state.gang):
            # NG2: kube-scheduler keeps the pods of its pod group state when the PodGroup goes
            # (podgroupstate.go removePodGroup): they stay the gang's, held at PreEnqueue
            # until a PodGroup of that name exists again
            if not new.members:
                gang_deleted(new, rec.at, f"PodGroup/{rec.name}")
            return new
        if new.members:
            new.orphans = {**new.orphans, **new.members}
            new.members = {}
            new.recount()
            new.commands = replace(new.commands, representative=None)
        gang_deleted(new, rec.at, f"PodGroup/{rec.name}")
        return new
    if old is not None and old.uid == rec.uid and not rv_newer(rec.resource_version, old.rv):
        return state
    new = state.copy()
    new.deleted_at = new.deleted_by = None
    new.podgroup = PodGroupInfo(rec.name, rec.uid, rec.resource_version, rec.settings,
                                rec.conditions)
    source = f"PodGroup/{rec.name}"
    spec, _ = spec_and_fallbacks(state.gang, source, rec.settings)
    if spec is None:
        new.spec_source = new.spec_settings = None
    else:
        new.spec_source, new.spec_settings = source, rec.settings
    return new


def gang_deleted(new: GangState, at: int, by: str) -> None:
    """Mark ``new`` (the fold's own fresh copy, with no live member and no PodGroup left) as
    deleted at event time ``at`` by the deletion of ``by`` (``Pod/<name>`` or
    ``PodGroup/<name>``), and forget what belonged to that gang: its spec, representative,
    latest cycle's outcomes, when it last switched its representative, whether it was ever
    scheduled and whether its group was once satisfied (Koordinator drops the ``GangGroupInfo`` with the group's last gang,
    ``core/gang_cache.go:206-220``; gangstate forgets it with this gang, see
    docs/koordinator-rules.md).

    Koordinator v1.8.0 removes the gang from its cache then: a gang initialised from pod
    annotations with its last pod (``pkg/scheduler/plugins/coscheduling/core/gang.go:298-302``,
    ``core/gang_cache.go:206-220``, rule M3), a PodGroup gang with its PodGroup
    (``core/gang_cache.go:295-310``, M5); a later pod or PodGroup creates a new gang
    (``core/gang_cache.go:124-149``). The state is kept as a tombstone (phase ``Deleted``): the
    epoch of the gang group must never go back (contracts.md, commands) and the diagnostics it
    emitted stay remembered, so a replay of the same facts is not news."""
    new.spec_source = new.spec_settings = None
    new.commands = replace(new.commands, representative=None, last_switch_at=None)
    new.outcomes = {}
    new.episode = None
    new.preemption = None
    new.storm = ()
    new.ever_scheduled = False
    new.once_satisfied = False
    new.deleted_at, new.deleted_by = at, by


def _remembered(state: GangState, key: int) -> GangState:
    """A copy of ``state`` with the cycle record ``key`` (``cycle_key``) among the recent ones
    (at most ``RECENT_CYCLES``, the oldest dropped), so that it is applied once."""
    new = state.copy()
    recent = dict(state.recent_cycles)
    recent[key] = None
    if len(recent) > RECENT_CYCLES:
        del recent[next(iter(recent))]
    new.recent_cycles = recent
    return new


def apply_cycle(state: GangState, rec: CycleObserved,
                settings: FoldSettings = FoldSettings()) -> GangState:
    """Fold a scheduler cycle record: the member's last stage/status, the representative the
    scheduler reports, and the outcomes of the latest cycle (for ``GangPermitTimeout``). A record
    already applied (same scheduler, cycle, pod, stage and status; for a record without a cycle
    number, its ``attempt`` in place of the cycle) changes nothing. A record without a cycle
    number is an attempt of its own: it is the latest, and it groups with no other record;
    it also counts in the gang's storm window when it failed (``episode.count_attempt``) and
    folds into its failure episode (``episode.fold_attempt``) unless the gang skips the gang
    checks (``decide.skips_gang_checks``: then its pods fail one by one, not as a gang); a
    ``Bound`` ends the episode and makes the group once satisfied (rule M2). A record of the
    scheduler shim (``rec.shim``) keeps its cycle number and folds into the episode and the
    storm window the same way (its failures: ``Unschedulable``,
    ``UnschedulableAndUnresolvable``, ``Error`` or ``Rejected``, the ones the scheduler writes a
    FailedScheduling Event for: none at PreEnqueue, K ``coscheduling.go:122-128``, and none for
    the ``Unreserve`` that follows a release it already wrote); while the gang's last shim
    record is at most ``SHIM_PREFERRED_SECONDS`` of event time old, a record derived from a
    scheduler Event changes nothing: the shim reports the same attempts, with cycle numbers.
    A record other than a ``Bound`` for a member whose node is known (``Member.node``: its
    ``spec.nodeName``) leaves that member's last stage/status/reason/cycle as they are (rule
    M6): kube-scheduler never attempts a pod that is assigned to a node (it goes to the
    scheduler's cache, not its queue: KS ``eventhandlers.go:142-145,166-178,469-472``), so the
    record tells an attempt made before the bind, its Event written late by the scheduler's
    rate-limited recorder; it still counts in the storm window, folds into the episode and
    sets the latest cycle's outcomes as any attempt does (the late Events of a gang whose pods
    are gone count the same way). So does, for a group that skips the gang checks
    (``decide.skips_gang_checks``), a record without a cycle number whose reason is a gang
    check's (``records.GANG_CHECK_REASONS``): it tells an attempt from before the group was
    once satisfied. A record with a cycle number that is not the shim's (the contract's first form, which no
    koord-scheduler v1.8.0 component writes: old traces) is an attempt too, folded like the
    shim's; when it reports the pod's own failure it names no culprit, so the pod is taken as
    the culprit, its message as the fit error and the members then waiting at Permit as those
    that fit (``episode.own_failure``), as the watch producer reads a FailedScheduling Event's
    own fit error. A record derived from the pod's ``PodScheduled`` condition
    (``rec.from_condition``) marks the member as attempted and feeds the episode's facts
    like one derived from an Event, but counts no attempt in the storm window and no round
    (``episode.fold_attempt``): kube-scheduler writes the same attempt as an Event too
    (docs/contracts.md, ``gangstate.cycle/v1`` "conditions"). Any change is made on a copy."""
    key = cycle_key(rec.scheduler, rec.attempt if rec.cycle is None else rec.cycle, rec.pod,
                    rec.stage, rec.status)
    if key in state.recent_cycles:
        return state
    if rec.cycle is None and not rec.shim and state.shim_at is not None \
            and rec.at <= state.shim_at + SHIM_PREFERRED_SECONDS * 1_000_000:
        # the shim reports the attempt (at most one round a GANGSTATE_SHIM_ROUND_INTERVAL in
        # detail); the Event still counts in the storm window, which counts the scheduler's
        # FailedScheduling Events; only the watch producer knows the cluster's room for the
        # short resource (the shim's records carry no ``capacity``): kept as a capacity
        # record's would be, or the hold (rule H1) would never see that the gang cannot fit
        counted = not rec.from_condition and rec.status != "Bound"  # a FailedScheduling Event
        room = rec.capacity is not None and state.episode is not None \
            and state.episode.capacity != rec.capacity
        if not counted and not room:
            return state  # a condition record or a bind: nothing of it is kept
        new = _remembered(state, key)
        if counted:
            new.storm = episode.count_attempt(state.storm, rec.at)
        if room and state.episode is not None:
            new.episode = state.episode._replace(capacity=rec.capacity)
        return new
    new = _remembered(state, key)
    members = state.members
    found = (rec.pod_uid, members[rec.pod_uid]) if rec.pod_uid in members \
        else state.member_by_name(rec.pod)
    if found is not None:
        uid, m = found
        # M6: kube-scheduler attempts no pod with spec.nodeName (KS eventhandlers.go:142-145,
        # 166-178,469-472): a record other than Bound for a member whose node is known tells
        # an attempt made before its bind (its Event written late): not its last cycle; nor,
        # for a group that skips the gang checks (P4: K core/core.go:213-216,301-304,372-374,
        # core/gang.go:567-568), a record derived from an Event or a condition (no cycle
        # number: the shim writes its records as the cycle runs) of a gang check's reason: it
        # tells an attempt made before the group was once satisfied (written late)
        stale = (m.node is not None and rec.status != "Bound") or (
            rec.cycle is None and rec.reason in GANG_CHECK_REASONS
            and decide.skips_gang_checks(state))
        if not stale and (m.cycle is None or rec.cycle is None or rec.cycle >= m.cycle):
            # a refusal by gangstate's own hold is not Coscheduling's: the shim activates the
            # pods when the hold ends, nothing strands them (HELD_BY_GANGSTATE)
            refused = rec.stage == "PreEnqueue" and rec.status != "Success" \
                and rec.reason != HELD_BY_GANGSTATE
            new.put_member(uid, new_member(m.name, m.rv, m.node, m.phase, m.terminating,
                                           m.settings, m.waits_for_podgroup, rec.stage,
                                           rec.status, rec.reason, rec.cycle, m.gates,
                                           (m.refused_at or rec.at) if refused else None))
    if rec.status == "Bound" and found is not None:
        new.once_satisfied = True  # M2: K core/core.go:506-517 (PostBind), core/gang.go:489-507
    if rec.shim:
        new.shim_at = rec.at if state.shim_at is None else max(state.shim_at, rec.at)
    # PR7: the scheduler tried the gang (after its preemption, or not)
    new.preemption = preemption.note_tried(state.preemption, rec.at)
    if rec.status == "Bound":
        new.episode = None
    else:
        if not rec.from_condition and not rec.shim and (rec.cycle is None or (
                rec.stage not in ("PreEnqueue", "Unreserve") and (
                    rec.status in FAILED_STATUSES or rec.status == "Rejected"))):
            # the storm counts the scheduler's FailedScheduling Events: a condition record
            # tells an attempt an Event also tells, and the shim's records (one round a
            # GANGSTATE_SHIM_ROUND_INTERVAL in detail) tell attempts the Events tell too
            new.storm = episode.count_attempt(state.storm, rec.at)
        if not decide.skips_gang_checks(new):
            if rec.cycle is not None and not rec.shim:
                rec = episode.own_failure(rec, new.n_waiting)
            new.episode = episode.fold_attempt(state.episode, rec,
                                               quiet_micros(state.gang, settings.quiet_micros))
            new.preemption = preemption.note_attempt(new.preemption, rec)
    latest = state.cycle
    if rec.cycle is None or latest is None or rec.cycle > latest:
        new.cycle = rec.cycle
        new.outcomes = {rec.pod: (rec.status, rec.reason)}
        _set_representative(new, rec.representative)
    elif rec.cycle == latest:
        new.outcomes = {**state.outcomes, rec.pod: (rec.status, rec.reason)}
        _set_representative(new, rec.representative)
    return new


def apply_ack(state: GangState, rec: AckObserved) -> GangState:
    """Fold a shim ack: an ``Applied`` switch makes its ``representative`` current. An ack
    already applied (same command id and outcome) changes nothing. Any change is made on a
    copy."""
    key = (rec.command_id, rec.outcome)
    commands = state.commands
    if key in commands.recent_acks:
        return state
    new = state.copy()
    new.commands = replace(commands, recent_acks=(commands.recent_acks + (key,))[-RECENT_ACKS:])
    if rec.outcome == "Applied" and rec.representative and rec.epoch <= commands.epoch:
        # only a command this gang group issued can have been applied
        new.commands = replace(new.commands, representative=rec.representative)
    return new


def _set_representative(new: GangState, representative: str | None) -> None:
    """Make ``representative`` (``ns/name`` or ``None``) the gang's representative on the
    fold's copy ``new``, replacing its ``Commands`` part only when it changes (most cycle
    records repeat it)."""
    if new.commands.representative != representative:
        new.commands = replace(new.commands, representative=representative)


DEFERRED = 64
"""Peers' summaries a gang holds back at most while it waits for answers."""


def apply_summary(state: GangState, rec: GangSummarized) -> GangState:
    """Fold another gang's summary: the latest word of each peer of the gang group is kept.

    While the gang waits for answers as of ``asked_as_of``, a summary newer than that is held
    back (``deferred``, at most ``DEFERRED``) and applied after the answers, in event-time
    order; a request for this gang's own summary is noted either way. Any change is made on a
    copy."""
    wanted = rec.wanted_as_of
    group = state.group
    asks: dict[str, int] = {} if wanted is None \
        or group.pending_answers.get(rec.gang, -1) >= wanted else {rec.gang: wanted}
    if group.asked_as_of is not None and rec.at > group.asked_as_of \
            and len(group.deferred) < DEFERRED:
        new = state.copy()
        new.group = replace(group, deferred=tuple(sorted(group.deferred + (rec,),
                                                         key=lambda r: r.at)),
                            pending_answers={**group.pending_answers, **asks} if asks
                            else group.pending_answers)
        return new
    peer = Peer(rec.groups, rec.exists, rec.initialized, rec.members, rec.min_member, rec.at,
                rec.once_satisfied)
    changed_peer = group.peers.get(rec.gang) != peer
    spec = state.spec
    # M2: the flag is the gang group's (K core/ganggroup.go:29-32), shared by its gangs: a
    # peer of this gang's group that reports it makes this gang once satisfied too
    latch = rec.once_satisfied and not state.once_satisfied and spec is not None \
        and rec.gang in spec.groups
    if not changed_peer and not asks and not latch:
        return state
    new = state.copy()
    if latch:
        new.once_satisfied = True
    if changed_peer or asks:
        new.group = replace(group, peers={**group.peers, rec.gang: peer} if changed_peer
                            else group.peers,
                            pending_answers={**group.pending_answers, **asks} if asks
                            else group.pending_answers)
    return new


def apply_preemption(state: GangState, rec: PreemptionObserved) -> GangState:
    """Fold a ``gangstate.preemption/v1`` record (a victim preempted for a member, or gone:
    ``preemption.apply_record``). A record reaching a gang already scheduled (minMember bound:
    a ``Preempted`` Event late, koord-scheduler throttles its Event writes) changes nothing:
    the preemption worked. Any change is made on a copy."""
    spec = state.spec
    if spec is not None and state.members and state.n_bound >= max(spec.min_member, 1):
        return state
    after = preemption.apply_record(state.preemption, rec)
    if after is state.preemption:
        return state
    new = state.copy()
    new.preemption = after
    return new


def apply_capacity(state: GangState, rec: CapacityObserved) -> GangState:
    """Fold a ``gangstate.capacity/v1`` record: the room for the short resource the gang's
    failure episode reports (``Episode.capacity``) becomes the one the watch producer saw last,
    without an attempt (no round, no storm, ``last_at`` unchanged). Nothing without an
    episode, or when the room is the same. Any change is made on a copy."""
    ep = state.episode
    if ep is None or ep.capacity == rec.capacity:
        return state
    new = state.copy()
    new.episode = ep._replace(capacity=rec.capacity)
    return new


def _note_pod(state: GangState, rec: PodObserved) -> None:
    """After a Pod event was applied to ``state`` (the fold's own copy): keep the member's
    nominated node (``preemption.note_pod``), and forget the preemption once the gang is
    scheduled (minMember bound: what it waited for has happened)."""
    spec = state.spec
    if spec is not None and state.members and state.n_bound >= max(spec.min_member, 1):
        state.preemption = None
    elif state.preemption is not None or rec.nominated_node is not None:
        state.preemption = preemption.note_pod(state.preemption, rec)


def apply(state: GangState, rec: GangRecord, settings: FoldSettings) -> GangState:
    """Fold one record into a gang's state (dispatch on the record kind); advances the gang's
    clock to the record's event time (never backwards). A record that changes nothing (stale,
    duplicate) returns ``state`` itself; otherwise a new state (``state`` is never changed)."""
    if isinstance(rec, PodObserved):
        after = apply_pod(state, rec, settings)
        if after is not state:
            _note_pod(after, rec)
    elif isinstance(rec, PreemptionObserved):
        after = apply_preemption(state, rec)
    elif isinstance(rec, CycleObserved):
        after = apply_cycle(state, rec, settings)
    elif isinstance(rec, PodGroupObserved):
        after = apply_podgroup(state, rec)
    elif isinstance(rec, GangSummarized):
        after = apply_summary(state, rec)
    elif isinstance(rec, CapacityObserved):
        after = apply_capacity(state, rec)
    else:
        after = apply_ack(state, rec)
    if after is not state and rec.at > after.clock:
        after.clock = rec.at
    return after


def _pruned_tombstones(state: GangState, now: int,
                       settings: FoldSettings) -> Mapping[str, tuple[str, int]]:
    if not state.tombstones:
        return state.tombstones
    horizon = now - settings.tombstone_micros
    for _rv, at in state.tombstones.values():
        if at < horizon:
            return {uid: v for uid, v in state.tombstones.items() if v[1] >= horizon}
    return state.tombstones


# -- step and timers ---------------------------------------------------------------------------

def step(state: GangState | None, rec: GangRecord, key: str,
         settings: FoldSettings = FoldSettings()) -> tuple[GangState, list[Output]]:
    """Apply one record to the state of gang ``key`` and decide what to emit.

    ``state`` is ``None`` for a gang seen for the first time. Returns the new state and the
    diagnostics/commands (JSON-ready dicts) the record caused, in a fixed order. Raises nothing
    for well-formed core records.
    """
    before = state if state is not None else new_state(key)
    after = apply(before, rec, settings)
    if after is before:
        return before, []
    after, outputs = decide.decide(after, rec, settings, before.commands.representative, before)
    return record_history(before, after, rec, rec.at, outputs), outputs


HISTORY = 16
"""How many transitions a gang keeps in its ``history`` (oldest dropped first)."""


def describe(rec: GangRecord) -> str:
    """A short human description of a record, used as the cause in a gang's history."""
    if isinstance(rec, PodObserved):
        return f"Pod {rec.namespace}/{rec.name} {rec.type} (resourceVersion {rec.resource_version})"
    if isinstance(rec, PodGroupObserved):
        return f"PodGroup {rec.namespace}/{rec.name} {rec.type} " \
               f"(resourceVersion {rec.resource_version})"
    if isinstance(rec, CycleObserved):
        which = "attempt" if rec.cycle is None else f"cycle {rec.cycle}"
        text = f"{which}: {rec.pod} {rec.stage} {rec.status}"
        return text + (f" ({rec.reason})" if rec.reason else "")
    if isinstance(rec, PreemptionObserved):
        return f"{rec.victim} {rec.type} (preempted for {rec.preemptor} on {rec.node})"
    if isinstance(rec, GangSummarized):
        return f"summary of gang {rec.gang}: {rec.members} pods, minMember {rec.min_member}"
    if isinstance(rec, CapacityObserved):
        c = rec.capacity
        return f"capacity of {c.resource} for {rec.culprit}: room for {c.room}"
    text = f"ack {rec.command_id} {rec.outcome}"
    return text + (f" ({rec.reason})" if rec.reason else "")


def record_history(before: GangState, after: GangState, cause: str | GangRecord, at: int,
                   outputs: list[Output]) -> GangState:
    """Append what changed between ``before`` and ``after`` (phase, counts, representative,
    spec source, diagnostics and commands emitted) to ``after.history``, keeping the last
    ``HISTORY`` entries; ``cause`` is a text or the record (``describe``d only when an entry
    is written). Sets ``after.history`` (``after`` must be the fold's own new state) and
    returns ``after``."""
    if not outputs and before.n_bound == after.n_bound and before.n_waiting == after.n_waiting \
            and before.n_in_cycle == after.n_in_cycle \
            and len(before.members) == len(after.members) \
            and before.commands.representative == after.commands.representative \
            and before.spec_source == after.spec_source \
            and before.spec_settings is after.spec_settings \
            and before.ever_scheduled == after.ever_scheduled \
            and before.lost is after.lost \
            and before.deleted_at == after.deleted_at \
            and not _refused_ack(before, after, cause):
        return after  # nothing the entry tells of (phase included) has changed
    changes: list[str] = []
    old_phase, new_phase = before.phase, after.phase
    if old_phase != new_phase:
        changes.append(f"phase {old_phase} -> {new_phase}")
    old_n, new_n = len(before.members), len(after.members)
    if old_n != new_n:
        changes.append(f"members {old_n} -> {new_n}")
    old_n, new_n = before.bound, after.bound
    if old_n != new_n:
        changes.append(f"bound {old_n} -> {new_n}")
    old_n, new_n = before.waiting, after.waiting
    if old_n != new_n:
        changes.append(f"waiting {old_n} -> {new_n}")
    if before.commands.representative != after.commands.representative:
        changes.append(f"representative {before.commands.representative or '-'} -> "
                       f"{after.commands.representative or '-'}")
    if before.spec_source != after.spec_source:
        changes.append(f"spec from {after.spec_source or 'nothing'}")
    for out in outputs:
        schema = out["schema"]
        if schema == decide.DIAGNOSTIC_SCHEMA:
            changes.append(f"emitted {out['reason']}")
        elif schema == decide.COMMAND_SCHEMA:
            changes.append(f"issued {out['type']} epoch {out['epoch']}")
    if _refused_ack(before, after, cause):
        assert isinstance(cause, AckObserved)
        changes.append(f"command {cause.command_id} refused")
    if not changes:
        return after
    entry: HistoryEntry = (at, "; ".join(changes),
                           cause if isinstance(cause, str) else describe(cause))
    after.history = (after.history + (entry,))[-HISTORY:]
    return after


def _refused_ack(before: GangState, after: GangState, cause: str | GangRecord) -> bool:
    """True when ``cause`` is a newly folded ack that did not apply its command (``Stale`` or
    ``PreconditionFailed``): the history tells it, with the shim's reason."""
    return isinstance(cause, AckObserved) and cause.outcome != "Applied" \
        and before.commands.recent_acks != after.commands.recent_acks


def next_due(state: GangState, settings: FoldSettings) -> int | None:
    """The event time (microseconds) of the gang's next timer, or ``None``: the earliest of
    the rule families' timers (``rules.next_timer``; each family owns its own, ``rules.TIMERS``
    lists them). Timers are not stored: they follow from the state.
    """
    timer = rules.next_timer(state, settings)
    return None if timer is None else timer.due


def _apply_deferred(state: GangState, settings: FoldSettings
                    ) -> tuple[GangState, list[Output]]:
    """Apply the held-back peer summaries, oldest first, once the gang stopped waiting."""
    pending = state.group.deferred
    state.group = replace(state.group, deferred=())
    outputs: list[Output] = []
    for rec in pending:
        state, out = step(state, rec, state.gang, settings)
        outputs.extend(out)
    return state, outputs


def fire_timers(state: GangState, now: int,
                settings: FoldSettings = FoldSettings()) -> tuple[GangState, list[Output]]:
    """Emit every output whose timer is due at or before ``now`` (microseconds of event time),
    earliest first (``rules.next_timer``; ties in ``rules.TIMERS`` order).

    Outputs fired by a timer carry the timer's due time as ``observed_at``, so the result does
    not depend on when the clock happened to pass it. After a timer that releases the peers'
    summaries held back (``TimerRule.releases_deferred``: the hold's grace period), those are
    applied, oldest first.
    """
    outputs: list[Output] = []
    while True:
        timer = rules.next_timer(state, settings)
        if timer is None or timer.due > now:
            return state, outputs
        due = timer.due
        rule = rules.TIMER_RULES[timer.kind]
        before, state = state, state.copy()  # the timer's changes go to a new state
        state, fired = rule.fire(state, due, settings)
        cause = rule.cause
        if rule.releases_deferred and state.group.asked_as_of is None \
                and state.group.deferred:
            state = record_history(before, state, cause, due, fired)
            outputs.extend(fired)
            state, fired = _apply_deferred(state, settings)
            before, state = state, state.copy()
            cause = "peers' later summaries"
        state = record_history(before, state, cause, due, fired)
        outputs.extend(fired)


class PartitionFold:
    """Drives the fold over one ordered input log with one event-time clock.

    ``store`` maps gang id to ``GangState`` (a dict offline, an adapter over the Faust table in
    the worker). ``feed(key, record)`` first fires every timer due by the record's event time,
    for every gang in the store with a pending timer, and removes the gangs gone by then
    (``streams.core.retention``: ``del store[key]``, or the gang's remnant), then applies the
    record. The clock never
    moves backwards: a record older than the clock is applied with the clock's time for timers.
    Deterministic: same records in the same order give the same outputs.

    ``gangstate.gang-summary/v1`` outputs (one gang telling another of its group about itself)
    are fed back into this same log right after the record that caused them when ``loopback``
    is true (one log holds every gang: ``gangstate fold``); the worker sets it false and sends
    them through ``gang-events`` to the receiving gang's partition instead.

    ``heard`` maps each cluster whose watch producer sent a tick through this log to that
    tick's event time (the latest): a watch producer ticks every partition about once a second,
    so a cluster with no gang is still known to be connected (``get fleet``).

    ``partition_of(key, partitions) -> int`` (the shell's: Kafka's murmur2 partitioner) checks
    that a ``gangstate.roster/v1`` record names gangs of its own partition: each member of a
    gang it names that it does not name is deleted (``roster``). Without it (``None``) rosters
    change nothing.
    """

    def __init__(self, store: MutableMapping[str, GangState],
                 settings: FoldSettings = FoldSettings(), *, loopback: bool = True,
                 partition_of: Callable[[str, int], int] | None = None) -> None:
        self.store = store
        self.settings = settings
        self.loopback = loopback
        self.partition_of = partition_of
        self.clock = 0
        self.heard: dict[str, int] = {}
        """cluster id -> the event time of the latest tick its watch producer sent here."""
        self._timers: list[tuple[int, str]] = []
        self._queued: dict[str, int] = {}  # gang id -> due time of its latest entry in _timers
        self._sweeps: list[tuple[int, str]] = []  # (retention.gone_at, gang id)

    def rebuild_timers(self, keys: Iterable[str] | None = None) -> None:
        """Recompute the timer index from the store (after a restart or partition assignment);
        ``keys`` limits the scan to those gangs."""
        self._timers = []
        self._queued = {}
        self._sweeps = []
        for key in (self.store.keys() if keys is None else keys):
            state = self.store.get(key)
            if state is not None:
                self._schedule(key, state)

    def _schedule(self, key: str, state: GangState) -> None:
        """Index the gang's next timer and its removal time. A due time already in the index
        for the gang is not pushed again: most records leave a gang's next timer where it was,
        and a second entry would fire nothing (``advance`` skips an entry whose due time is no
        longer the gang's)."""
        due = next_due(state, self.settings)
        if due is not None and self._queued.get(key) != due:
            heapq.heappush(self._timers, (due, key))
            self._queued[key] = due
        gone = retention.gone_at(state, self.settings.tombstone_micros)
        if gone is not None:
            heapq.heappush(self._sweeps, (gone, key))

    def advance(self, now: int) -> list[Output]:
        """Move the clock to ``now`` (if later) and fire every timer due by then, earliest
        first (ties by gang id)."""
        if now > self.clock:
            self.clock = now
        outputs: list[Output] = []
        while self._timers and self._timers[0][0] <= self.clock:
            due, key = heapq.heappop(self._timers)
            if self._queued.get(key) == due:
                del self._queued[key]
            state = self.store.get(key)
            if state is None or next_due(state, self.settings) != due:
                continue  # stale index entry: the state moved on
            state, fired = fire_timers(state, self.clock, self.settings)
            self.store[key] = state
            outputs.extend(fired)
            self._schedule(key, state)
        self._sweep()
        return outputs

    def _sweep(self) -> None:
        """Remove the gangs gone by the clock (``retention.is_gone``): delete them from the
        store, or keep their ``retention.remnant``."""
        window = self.settings.tombstone_micros
        while self._sweeps and self._sweeps[0][0] <= self.clock:
            due, key = heapq.heappop(self._sweeps)
            state = self.store.get(key)
            if state is None or retention.gone_at(state, window) != due \
                    or not retention.is_gone(state, self.clock, window,
                                             next_due(state, self.settings)):
                continue  # stale entry, or a timer pending (its firing schedules it again)
            rest = retention.remnant(state)
            if rest is None:
                del self.store[key]
            else:
                self.store[key] = rest

    def feed(self, key: str | None, rec: Record) -> list[Output]:
        """Fire due timers, then apply ``rec`` to gang ``key``; returns all outputs in order.

        ``key`` is the gang id (the gang group id for acks); ignored for ticks.
        """
        # Timers first, and what they ask of other gangs answered before the record applies,
        # so an answer describes the other gang as of the timer's due time.
        outputs = self._loop(self.advance(rec.at))
        if isinstance(rec, Tick):
            if rec.cluster is not None and rec.at > self.heard.get(rec.cluster, -1):
                self.heard[rec.cluster] = rec.at
            return outputs
        if isinstance(rec, RosterObserved):
            return outputs + self.roster(rec)
        if key is None:
            return outputs
        state = self.store.get(key)
        new, emitted = step(state, rec, key, self.settings)
        if new is not state:
            self.store[key] = new
            self._schedule(key, new)
        outputs.extend(emitted)
        # A record can make an already-passed timer live again (a peer's answer arrived):
        # fire it now, with its own due time, rather than at the next record.
        if self._due(self._timers) or self._due(self._sweeps):
            outputs.extend(self.advance(self.clock))
        return self._loop(outputs)

    def roster(self, rec: RosterObserved) -> list[Output]:
        """Apply a watch producer's roster: for every gang it names (in ``rec``'s cluster, on
        ``rec.partition`` by ``partition_of``), each live member whose uid it does not name is
        deleted, as a ``DELETED`` of its last known version at the roster's event time would
        delete it (the rules then tell what a deletion tells: a loss, a gang gone). A gang the
        roster does not name is left as it is: the watch may not see it at all (another
        namespace or scheduler name: ``-n``, ``--scheduler-name``), so its silence proves
        nothing. Gangs in id order, members in name order; returns the outputs."""
        if self.partition_of is None:
            return []
        outputs: list[Output] = []
        for gang in sorted(rec.gangs):
            key = key_of(rec.cluster, gang)
            if self.partition_of(key, rec.partitions) != rec.partition:
                continue  # not this partition's gang: the sender's mistake changes nothing
            state = self.store.get(key)
            if state is None:
                continue
            listed = rec.gangs[gang]
            gone = sorted(((m.name, uid, m) for uid, m in state.members.items()
                           if uid not in listed), key=lambda item: item[0])
            for name, uid, m in gone:
                outputs.extend(self.feed(key, PodObserved(
                    rec.at, "DELETED", state.gang, state.namespace, name, uid, m.rv, m.node,
                    m.phase, m.terminating, m.settings, m.waits_for_podgroup, m.gates)))
        return outputs

    def _due(self, index: list[tuple[int, str]]) -> bool:
        """True when the earliest entry of ``index`` (``_timers`` or ``_sweeps``) is due by the
        clock."""
        return bool(index) and index[0][0] <= self.clock

    def _loop(self, outputs: list[Output]) -> list[Output]:
        if not self.loopback:
            return outputs
        for out in outputs:
            if out["schema"] == decide.SUMMARY_SCHEMA:
                break
        else:
            return outputs  # nothing to feed back (the common case)
        done: list[Output] = []
        queue = list(outputs)
        while queue:
            out = queue.pop(0)
            if out["schema"] != decide.SUMMARY_SCHEMA:
                done.append(out)
                continue
            rec = summary_from_output(out)
            to = key_of(out.get("cluster", DEFAULT_CLUSTER), rec.to)  # within its cluster
            state = self.store.get(to)
            new, emitted = step(state, rec, to, self.settings)
            if new is not state:
                self.store[to] = new
                self._schedule(to, new)
            queue.extend(emitted)
            queue.extend(self.advance(self.clock))
        return done


def summary_from_output(out: Output) -> GangSummarized:
    """The core record of a ``gangstate.gang-summary/v1`` output (for the offline loopback)."""
    from .timefmt import parse_time

    wanted = out.get("wanted_as_of")
    return GangSummarized(parse_time(out["observed_at"]), out["gang"], out["to"],
                          tuple(out["groups"]), out["exists"], out["initialized"],
                          out["members"], out["min_member"],
                          None if wanted is None else parse_time(wanted),
                          bool(out.get("once_satisfied", False)))
