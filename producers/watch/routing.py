"""Routing: watch events -> actions (``Publish``, ``Drop``, ``DeadLetter``), deterministic given
the router's state; no I/O, no clock.

Where it sits: the watch producer's pure core, between the streams that list and watch
(``producers.watch.watching``) and Kafka: ``GangRouter`` remembers which gang each pod uid belongs
to, routes Pods, PodGroups (Koordinator's and Kubernetes' own), CompositePodGroups, Workloads
and scheduler Events to their gang's key, turns scheduler Events and
pod conditions into ``gangstate.cycle/v1`` records (``producers.watch.scheduler_events``,
``producers.watch.conditions``) and preemptions into ``gangstate.preemption/v1``, holds an
Event whose pod is not known yet, and tells a gang short of a resource that the room for it
changed without an attempt (``gangstate.capacity/v1``, on Node and bound-pod changes).
``producers.watch.dump`` routes a dump through the same router.

Must not: decide anything about gangs beyond membership (``streams.core.native.gang_of_pod_object``,
the decoder's own: native first, then Koordinator's), read
the wall clock (``at``, event time in microseconds, is given), or drop a record without a
``Drop`` that says why.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from pydantic import ValidationError

from producers.watch.conditions import changed_condition, condition_attempt
from producers.watch.node_cache import NodeCache, pod_priority
from producers.watch.plan import DEFAULT_EVENT_REASONS, DEFAULT_SCHEDULERS
from producers.watch.scheduler_events import (PREEMPTED_REASON, Outcome, dominant_fit_reason,
                                              parse_scheduler_event, preempted_by,
                                              preemption_of)
from producers.watch.shapes import event_count, kube_record, slim
from streams.wire.contracts import (CAPACITY_SCHEMA, CYCLE_SCHEMA, PREEMPTION_SCHEMA,
                                    CapacityRecord)
from streams.core.capacity import pod_requests, tolerations_of
from streams.core.native import (KOORDINATOR, KUBE_SCHEDULER, composite_key, gang_key,
                                 gang_of_pod_object, is_native, is_native_podgroup)
from streams.core.spec import (parse_spec, settings_of_pod, settings_of_podgroup,
                               waits_for_podgroup)
from streams.core.timefmt import format_time, parse_time


def gang_group_of(gang: str, pod: Mapping[str, Any],
                  podgroup: Mapping[str, Any] | None) -> str:
    """The gang group id of ``gang`` as the scheduler would compute it from what is known: a
    native gang (kube-scheduler's, ``streams.core.native``) is a group of itself, or, when its
    known PodGroup names a ``parentCompositePodGroupName``, that CompositePodGroup's id
    (``composite_key``: the tree is scheduled together, ``native.native_spec``); no
    Koordinator setting of a native PodGroup is read. For a Koordinator gang, the PodGroup's
    ``groups`` annotation for pods that wait for their PodGroup, else the pod's; the gang
    itself when the spec cannot be initialised (``streams.core.spec.parse_spec``). Pure."""
    if is_native(gang):
        parent = ((podgroup or {}).get("spec") or {}).get("parentCompositePodGroupName")
        if isinstance(parent, str) and parent:
            return composite_key(gang.partition("/")[0], parent)
        return gang
    meta = pod.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    if waits_for_podgroup(labels):
        if podgroup is None:
            return gang
        pg_meta = podgroup.get("metadata") or {}
        spec, _ = parse_spec(gang, settings_of_podgroup(podgroup.get("spec") or {},
                                                        pg_meta.get("annotations") or {}),
                             "PodGroup", from_podgroup=True)
    else:
        spec, _ = parse_spec(gang, settings_of_pod(labels, annotations), "Pod")
    return spec.gang_group if spec is not None else gang



def podgroup_key(podgroup: Mapping[str, Any]) -> str:
    """The gang id of a PodGroup: ``ns/name`` for Koordinator's (``scheduling.sigs.k8s.io``),
    ``ns/name@kube-scheduler`` for a native one (``scheduling.k8s.io``: its ``apiVersion``
    tells), so the two of one name are two gangs. Pure."""
    meta = podgroup.get("metadata") or {}
    native = is_native_podgroup(str(podgroup.get("apiVersion") or ""))
    return gang_key(meta.get("namespace", ""), meta.get("name", ""),
                    KUBE_SCHEDULER if native else KOORDINATOR)


@dataclass(frozen=True)
class Publish:
    """Send ``record`` to the ``gang-events`` topic under ``key``."""

    key: str
    record: dict[str, Any]


@dataclass(frozen=True)
class Drop:
    """Publish nothing, on purpose; ``reason`` is counted (``no-gang``, ``other-scheduler``,
    ``pod-gone``...). ``detail`` says which object, for a DEBUG log line (not compared)."""

    reason: str
    detail: str = field(default="", compare=False)


@dataclass(frozen=True)
class DeadLetter:
    """Send ``record`` to the dead-letters topic as a ``gangstate.dead-letter/v1`` with ``error``."""

    record: dict[str, Any]
    error: str
    reason: str


Action = Publish | Drop | DeadLetter


def _first_error(err: ValidationError) -> str:
    """The first error of a contract check as ``field: message`` (one line). Pure."""
    first = err.errors(include_url=False)[0]
    loc = ".".join(str(part) for part in first["loc"])
    return f"{loc}: {first['msg']}" if loc else str(first["msg"])


def _not_an_attempt(outcome: Outcome) -> Drop:
    """Why a message that reports no attempt makes no cycle record: ``gangstate-hold`` for
    gangstate's own hold (catalogue row ``G1``), else ``not-an-attempt``. Pure."""
    return Drop("gangstate-hold" if outcome.form == "G1" else "not-an-attempt")


def _event_time(event: Mapping[str, Any]) -> str | None:
    """A core/v1 Event's own time in the contract's form (RFC 3339 UTC, microseconds): its
    ``eventTime`` (events.k8s.io recorders, as kube-scheduler's), else ``lastTimestamp``, else
    ``firstTimestamp``; ``None`` when none is set or readable. Pure."""
    for key in ("eventTime", "lastTimestamp", "firstTimestamp"):
        value = event.get(key)
        if isinstance(value, str) and value:
            try:
                return format_time(parse_time(value))
            except ValueError:
                continue
    return None


@dataclass
class _Held:
    due: int
    type: str
    event: dict[str, Any]
    at: int


@dataclass(frozen=True)
class _Room:
    """What the last cycle record of a gang that carried ``capacity`` said, to recompute it:
    the culprit's ``namespace`` (the pod's), ``culprit`` (``ns/name``), its ``fit_error``, and
    the ``capacity`` the gang was told last (a cycle record's or a capacity record's)."""

    namespace: str
    culprit: str
    fit_error: str
    capacity: dict[str, Any]


@dataclass
class GangRouter:
    """Turns watch events into actions, remembering which gang each pod uid belongs to.

    ``route(resource, type, obj, prev, at)`` -> actions; ``expire(at)`` -> ``Drop("pod-gone")``
    for Events held past ``hold_events`` seconds without their pod. ``at`` is event time in
    microseconds (the watcher's clock). Deterministic: same calls, same actions.

    ``rooms`` are the gangs told the room of their short resource: those whose last cycle
    record with a ``capacity`` did not end in a bind. Each Node or bound-pod change recomputes
    their room and publishes a ``gangstate.capacity/v1`` for each gang whose room changed
    (``_room_changed``): a gang held out of the scheduling queue has no attempts that could
    tell it. Cost: O(gangs in ``rooms`` x nodes) per change of what the node cache keeps (none
    for a status update of a bound pod or a Node's heartbeat: the cache keeps per-node sums,
    so a bound pod's change touches one node); the set stays
    small (gangs short of a resource now, forgotten once scheduled, gone, or no longer
    computable).
    """

    scheduler_names: tuple[str, ...] = DEFAULT_SCHEDULERS
    event_reasons: tuple[str, ...] = DEFAULT_EVENT_REASONS
    hold_events: float = 10.0
    remember_deleted: float = 600.0
    pods: dict[str, tuple[str | None, dict[str, Any]]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # "ns/name" -> uid
    # gang id -> PodGroup: Koordinator's "ns/name", a native one's "ns/name@kube-scheduler"
    podgroups: dict[str, dict[str, Any]] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)  # uid -> forget after (micros)
    held: dict[str, list[_Held]] = field(default_factory=dict)  # "ns/name" -> Events
    held_due: int | None = None  # no held Event is due before this (micros); None: none held
    nodes: NodeCache = field(default_factory=NodeCache)  # room per node, for the shortfall
    # bound pods: uid -> ("ns/name", grace period in seconds or None), for Preempted victims
    bound: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    # victims of a preemption for a gang: victim uid -> {gang: the Preempted record sent}
    victims: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # _to_place's answers, (gang, resource) -> requests, until a pod event
    placing: dict[tuple[str, str], tuple[int, ...]] = field(
        default_factory=dict, repr=False, compare=False)
    # gangs whose room is recomputed on Node and bound-pod changes: gang -> what it was told
    rooms: dict[str, _Room] = field(default_factory=dict)

    def route(self, resource: str, type_: str, obj: dict[str, Any],
              prev: dict[str, Any] | None, at: int) -> list[Action]:
        """Actions for one watch event (``type_`` ADDED/MODIFIED/DELETED/SYNC) of ``obj``;
        ``prev`` is the stream's last known state of the same uid (``None`` if new).
        ``nodes`` and ``boundpods`` (pods of any scheduler bound to a node) feed the per-node
        cache (``node_cache.NodeCache``) whose room the cycle records of a gang short of a
        resource carry; when what it keeps changed, the ``gangstate.capacity/v1`` of each gang
        in ``rooms`` whose room changed (``_room_changed``). A PodGroup is published under its
        gang id (``podgroup_key``: Koordinator's ``ns/name``, a native one's
        ``ns/name@kube-scheduler``) and kept by it in ``podgroups``, so the two of one name
        stay apart; a CompositePodGroup under ``composite_key``, a Workload under the gang id
        of its name."""
        if resource == "nodes":
            return self._room_changed(at) if self.nodes.node(type_, obj) else []
        if resource == "boundpods":
            changed = self.nodes.pod(type_, obj)
            actions = self._bound_pod(type_, obj, at)
            return actions + self._room_changed(at) if changed else actions
        if resource == "pods":
            return self._pod(type_, obj, prev, at) + self._victim_gone(type_, obj, at)
        if resource == "podgroups":
            key = podgroup_key(obj)
            if type_ == "DELETED":
                self.podgroups.pop(key, None)
            else:
                self.podgroups[key] = obj
            return [Publish(key, kube_record("podgroups", type_, obj, at))]
        if resource in ("compositepodgroups", "workloads"):
            # a CompositePodGroup under its own id (the gang that counts its children: the
            # decoder's key), a Workload under the gang id of its name (published for taps
            # and audits; the fold skips it)
            meta = obj["metadata"]
            ns = meta.get("namespace", "")
            key = composite_key(ns, meta["name"]) if resource == "compositepodgroups" \
                else gang_key(ns, meta["name"], KUBE_SCHEDULER)
            return [Publish(key, kube_record(resource, type_, obj, at))]
        return self._event(type_, obj, at)

    def _pod(self, type_: str, obj: dict[str, Any], prev: dict[str, Any] | None,
             at: int) -> list[Action]:
        meta = obj["metadata"]
        ns, uid = meta.get("namespace", ""), meta["uid"]
        gang = gang_of_pod_object(ns, meta.get("labels") or {}, meta.get("annotations") or {},
                                  obj.get("spec") or {})
        actions: list[Action] = []
        before = self.pods.get(uid, (None, None))[0]
        if before is not None and before != gang and prev is not None:
            # the pod left its gang (labels are mutable): tell the old gang, with the new
            # resourceVersion so that the fold sees it as newer
            gone = copy.deepcopy(prev)
            gone["metadata"]["resourceVersion"] = meta.get("resourceVersion", "")
            actions.append(Publish(before, kube_record("pods", "DELETED", gone, at)))
        self.pods[uid] = (gang, obj)
        self.placing.clear()
        self.names[f"{ns}/{meta['name']}"] = uid
        if type_ == "DELETED":
            self.deleted[uid] = at + int(self.remember_deleted * 1e6)
        else:
            self.deleted.pop(uid, None)
        if gang is None:
            actions.append(Drop("no-gang"))
        else:
            actions.append(Publish(gang, kube_record("pods", type_, obj, at)))
            if type_ != "DELETED":
                actions += self._condition(gang, obj, prev if before == gang else None, at)
        for held in self.held.pop(f"{ns}/{meta['name']}", []) + self.held.pop(f"uid:{uid}", []):
            # still unknown (an Event of another uid of this name): held until its own due time
            actions += self._event(held.type, held.event, held.at, held.due)
        self._forget(at)
        return actions

    def _bound_pod(self, type_: str, obj: dict[str, Any], at: int) -> list[Action]:
        """Keep a bound pod's name and grace period (``metadata.deletionGracePeriodSeconds``
        once it is being deleted, else ``spec.terminationGracePeriodSeconds``) for the
        ``Preempted`` records; tell the gangs a victim was preempted for that it is gone."""
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        uid = str(meta.get("uid", ""))
        if type_ == "DELETED":
            self.bound.pop(uid, None)
            return self._victim_gone(type_, obj, at)
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds")
        self.bound[uid] = (f"{meta.get('namespace', '')}/{meta.get('name', '')}",
                           grace if isinstance(grace, int) and not isinstance(grace, bool)
                           and grace >= 0 else None)
        return []

    def _victim_gone(self, type_: str, obj: dict[str, Any], at: int) -> list[Action]:
        """A ``gangstate.preemption/v1`` of type ``Deleted`` to every gang a victim was
        preempted for, when that victim's DELETED comes (its termination completed; the
        ``boundpods`` stream, or the pods stream for a victim of koord-scheduler's)."""
        if type_ != "DELETED":
            return []
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        sent = self.victims.pop(uid, None)
        if not sent:
            return []
        return [Publish(gang, {**record, "type": "Deleted", "observed_at": format_time(at)})
                for gang, record in sorted(sent.items())]

    def _preempted(self, type_: str, event: dict[str, Any], at: int,
                   due: int | None) -> list[Action]:
        """A ``Preempted`` Event on a victim (``Preempted by pod <preemptor uid> on node
        <node>``, kube-scheduler v1.35.2 ``framework/preemption/preemption.go:216``): a
        ``gangstate.preemption/v1`` for the preemptor's gang, looked up by the preemptor's uid
        among the pods seen; held like other Events while the preemptor is unknown (keyed by
        its ``related`` ``ns/name``, or its uid), then dropped as ``preemptor-unknown``."""
        if type_ == "DELETED":
            return [Drop("event-deleted")]
        involved = event.get("involvedObject") or {}
        found = preempted_by(event.get("message") or "")
        if found is None or not involved.get("name"):
            return [Drop("preempted-unreadable")]
        preemptor_uid, node = found
        known = self.pods.get(preemptor_uid)
        if known is None:
            related = event.get("related") or {}
            key = f"{related['namespace']}/{related['name']}" \
                if related.get("namespace") and related.get("name") else f"uid:{preemptor_uid}"
            return self._hold(key, type_, event, at, due)
        gang, pod = known
        if gang is None:
            return [Drop("no-gang")]
        pod_meta = pod.get("metadata") or {}
        victim_uid = str(involved.get("uid") or "")
        victim = self.bound.get(victim_uid)
        event_meta = event.get("metadata") or {}
        record: dict[str, Any] = {
            "schema": PREEMPTION_SCHEMA, "observed_at": format_time(at), "gang": gang,
            "type": "Preempted",
            "victim": {"namespace": involved.get("namespace", ""), "name": involved["name"],
                       "uid": victim_uid},
            "node": node,
            "preemptor": {"namespace": pod_meta.get("namespace", ""),
                          "name": pod_meta.get("name", ""), "uid": preemptor_uid},
            "grace_period_seconds": None if victim is None else victim[1],
            "victim_bound": victim is not None,
            "source": {"event": f"{event_meta.get('namespace', '')}/"
                                f"{event_meta.get('name', '')}",
                       "uid": str(event_meta.get("uid", "")), "count": event_count(event)},
        }
        when = _event_time(event)
        if when is not None:
            record["event_time"] = when
        if victim_uid and victim is not None:
            self.victims.setdefault(victim_uid, {})[gang] = record
        return [Publish(gang, record)]

    def _hold(self, key: str, type_: str, event: dict[str, Any], at: int,
              due: int | None) -> list[Action]:
        """Hold ``event`` (seen at ``at``, micros) under ``key`` (its pod's ``ns/name``, or
        ``uid:<uid>``) until its pod is seen or ``due`` (micros; ``hold_events`` seconds after
        ``at`` when ``None``); nothing to do now: ``[]``."""
        due = at + int(self.hold_events * 1e6) if due is None else due
        self.held.setdefault(key, []).append(_Held(due, type_, event, at))
        self.held_due = due if self.held_due is None else min(self.held_due, due)
        return []

    def roster(self) -> dict[str, list[str]]:
        """Gang id -> the uids (sorted) of the gang pods this router knows to exist now (not
        deleted), every gang with one at least: what ``gangstate.roster/v1`` tells the fold
        once a new watch process has published its first lists."""
        out: dict[str, list[str]] = {}
        for uid, (gang, _obj) in self.pods.items():
            if gang is not None and uid not in self.deleted:
                out.setdefault(gang, []).append(uid)
        return {gang: sorted(uids) for gang, uids in sorted(out.items())}

    def _forget(self, at: int) -> None:
        """Forget the pods deleted ``remember_deleted`` seconds before ``at`` (micros), and
        the ``rooms`` of gangs that have no pod left."""
        gone = [u for u, until in self.deleted.items() if until <= at]
        for uid in gone:
            del self.deleted[uid]
            gang, obj = self.pods.pop(uid, (None, {}))
            meta = obj.get("metadata") or {}
            name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
            if self.names.get(name) == uid:
                del self.names[name]
        if gone and self.rooms:
            present = {gang for gang, _ in self.pods.values()}
            for gang in [g for g in self.rooms if g not in present]:
                del self.rooms[gang]

    def _event(self, type_: str, event: dict[str, Any], at: int,
               due: int | None = None) -> list[Action]:
        reason = event.get("reason") or ""
        if reason not in self.event_reasons:
            return [Drop("event-reason")]
        component = (event.get("reportingComponent")
                     or (event.get("source") or {}).get("component") or "")
        if component and component not in self.scheduler_names:
            return [Drop("other-scheduler")]
        if reason == PREEMPTED_REASON:
            return self._preempted(type_, event, at, due)
        involved = event.get("involvedObject") or {}
        ns, name = involved.get("namespace", ""), involved.get("name", "")
        if not ns or not name:
            return [DeadLetter(kube_record("events", type_, event, at),
                               "a scheduler Event without involvedObject.namespace and "
                               "involvedObject.name: no pod and no gang can be found for it",
                               "malformed")]
        uid = involved.get("uid") or self.names.get(f"{ns}/{name}")
        known = self.pods.get(uid) if uid else None
        if known is None:
            return self._hold(f"{ns}/{name}", type_, event, at, due)
        gang, pod = known
        if gang is None:
            return [Drop("no-gang")]
        event_meta = event.get("metadata") or {}
        if not event_meta.get("uid"):
            return [DeadLetter(kube_record("events", type_, event, at),
                               "a scheduler Event without metadata.uid: the attempt it reports "
                               "cannot be told from a repeat", "malformed")]
        actions: list[Action] = [Publish(gang, kube_record("events", type_, event, at))]
        if type_ == "DELETED":
            return actions  # an Event expiring (TTL) says nothing about a cycle
        outcome = parse_scheduler_event(reason, event.get("message") or "", ns, name)
        if not outcome.attempt:
            # "skip schedule deleting pod" (kube-scheduler v1.35.2 schedule_one.go:399-404):
            # the pod is being deleted and was not attempted; or gangstate's own hold (G1):
            # the shim refused it untried. The Event is still published
            return actions + [_not_an_attempt(outcome)]
        # Events carry no cycle counter (it is only in the scheduler's log): the record's
        # cycle is unknown, and the Event's uid and count identify the attempt, so that a
        # relist of the same Event is the same record and a repeat (count + 1) a new one.
        source = {"event": f"{event_meta.get('namespace', '')}/{event_meta.get('name', '')}",
                  "uid": event_meta["uid"], "count": event_count(event)}
        actions.append(Publish(gang, self._cycle_record(
            gang, pod, ns, name, uid, outcome, event.get("message") or "",
            component or (pod.get("spec") or {}).get("schedulerName", ""), source, at)))
        return actions

    def pod_condition(self, pod: dict[str, Any], at: int) -> list[Action]:
        """The cycle record of ``pod``'s failed ``PodScheduled`` condition at event time
        ``at``, for a pod already routed (its gang and last routed state known: a dump routes
        each pod at its creation without the condition, then this at the condition's
        ``lastTransitionTime``, ``producers.watch.dump``); nothing for a pod not known, of no
        gang, or whose condition did not change."""
        known = self.pods.get((pod.get("metadata") or {}).get("uid") or "")
        if known is None or known[0] is None:
            return []
        return self._condition(known[0], slim("pods", pod), known[1], at)

    def _condition(self, gang: str, pod: dict[str, Any], prev: dict[str, Any] | None,
                   at: int) -> list[Action]:
        """The cycle record of a change of the pod's failed ``PodScheduled`` condition
        (``conditions.changed_condition``: reason or message differ from ``prev``, the previous
        state of the pod in the same gang), read as a ``FailedScheduling`` Event of the same
        message (kube-scheduler writes both, ``producers.watch.conditions``); ``source``:
        ``kind`` ``condition``, ``uid`` the attempt id (``conditions.condition_attempt``),
        ``count`` 1, ``last_transition_time``. None otherwise, or for a message that reports
        no attempt."""
        condition = changed_condition(pod, prev)
        if condition is None:
            return []
        meta = pod.get("metadata") or {}
        ns, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
        message = condition["message"]
        outcome = parse_scheduler_event("FailedScheduling", message, ns, name)
        if not outcome.attempt:
            return [_not_an_attempt(outcome)]
        source = {"kind": "condition",
                  "uid": condition_attempt(uid, condition, str(meta.get("resourceVersion", ""))),
                  "count": 1,
                  "last_transition_time": condition.get("lastTransitionTime") or ""}
        scheduler = (pod.get("spec") or {}).get("schedulerName") or (
            self.scheduler_names[0] if len(self.scheduler_names) == 1 else "")
        return [Publish(gang, self._cycle_record(gang, pod, ns, name, uid, outcome, message,
                                                 scheduler, source, at))]

    def _cycle_record(self, gang: str, pod: dict[str, Any], ns: str, name: str,
                      uid: str | None, outcome: Outcome, message: str, scheduler: str,
                      source: dict[str, Any], at: int) -> dict[str, Any]:
        """The ``gangstate.cycle/v1`` record of one attempt of pod ``ns/name`` (its last known
        object ``pod``, of ``gang``) read into ``outcome`` from ``message``, at event time
        ``at`` (microseconds); ``source`` names the Event or condition it came from (it gets
        ``parsed``, ``form`` and ``truncated``); ``capacity`` from the node cache. A record
        with ``capacity`` puts the gang in ``rooms`` (what it was told, to recompute), a bind
        takes it out."""
        pod_meta = pod.get("metadata") or {}
        pg = self.podgroups.get(gang)
        cycle: dict[str, Any] = {
            "schema": CYCLE_SCHEMA, "observed_at": format_time(at),
            "scheduler": scheduler,
            "cycle": None,
            "pod": {"namespace": ns, "name": name, "uid": pod_meta.get("uid", uid or "")},
            "gang": gang, "gang_group": gang_group_of(gang, pod, pg),
            "stage": outcome.stage, "status": outcome.status, "reason": outcome.reason,
            "message": message, "representative": None,
            "node": outcome.node,
            "source": {**source, "parsed": outcome.parsed, "form": outcome.form},
        }
        # optional fields (contracts.md, cycle/v1 "culprit"): only what the message says
        if outcome.culprit is not None:
            cycle["culprit"] = outcome.culprit
        if outcome.fit_error is not None:
            cycle["fit_error"] = outcome.fit_error
        if outcome.already_wait_for_bound is not None:
            cycle["already_wait_for_bound"] = outcome.already_wait_for_bound
        if outcome.truncated:
            cycle["source"]["truncated"] = True
        said = preemption_of(message)
        if said is not None and outcome.culprit is not None:
            cycle["preemption"], cycle["preemption_text"] = said
        capacity = self._capacity(ns, outcome.culprit, outcome.fit_error)
        if capacity is not None:
            cycle["capacity"] = capacity
        if outcome.status == "Bound":
            self.rooms.pop(gang, None)  # scheduled: nothing short any more
        elif capacity is not None and outcome.culprit is not None:
            self.rooms[gang] = _Room(ns, outcome.culprit, outcome.fit_error or "",
                                     dict(capacity))
        return cycle

    def _room_changed(self, at: int) -> list[Action]:
        """After a change of the node cache at event time ``at`` (micros): for each gang in
        ``rooms`` (in gang order) whose recomputed room differs from the one it was told, a
        ``gangstate.capacity/v1`` keyed by the gang (``observed_at`` ``at``; the culprit as
        in the cycle record it follows), checked against ``CapacityRecord``; it becomes what
        the gang was told. A gang whose room cannot be computed any more (its culprit
        deleted or forgotten, no node known, the request gone) leaves ``rooms``, as does one
        whose record the contract refuses (``Drop("capacity-invalid")``, never expected).
        Cost: one ``_capacity`` per gang in ``rooms``, each O(nodes) when its
        key is new since the change (gangs asking the same share the node cache's answer)."""
        actions: list[Action] = []
        for gang in sorted(self.rooms):
            room = self.rooms[gang]
            uid = self.names.get(room.culprit)
            capacity = None if uid is None or uid in self.deleted else \
                self._capacity(room.namespace, room.culprit, room.fit_error)
            if capacity is None:
                del self.rooms[gang]
                continue
            if capacity == room.capacity:
                continue
            record = {"schema": CAPACITY_SCHEMA, "observed_at": format_time(at),
                      "gang": gang, "culprit": room.culprit, "capacity": capacity}
            try:
                CapacityRecord.model_validate(record)
            except ValidationError as err:
                del self.rooms[gang]
                actions.append(Drop("capacity-invalid", f"gang {gang}: {_first_error(err)}"))
                continue
            self.rooms[gang] = replace(room, capacity=dict(capacity))
            actions.append(Publish(gang, record))
        return actions

    def _capacity(self, namespace: str, culprit: str | None,
                  fit_error: str | None) -> dict[str, Any] | None:
        """The node cache's room for the culprit's short resource: the dominant reason of its
        fit error must be ``Insufficient <resource>`` (kube-scheduler v1.35.2
        ``framework/plugins/noderesources/fit.go:649-735``) and the culprit a known pod with
        a request of it; ``None`` otherwise or while no node is known. With the culprit's
        priority and ``room_preempting`` (rule PR4)."""
        reason = dominant_fit_reason(fit_error or "")
        if not culprit or not reason or not reason.startswith("Insufficient "):
            return None
        resource = reason[len("Insufficient "):]
        uid = self.names.get(culprit if "/" in culprit else f"{namespace}/{culprit}")
        known = self.pods.get(uid) if uid else None
        if known is None:
            return None
        spec = known[1].get("spec") or {}
        try:
            request = pod_requests(spec).get(resource, 0)
        except ValueError:
            return None
        if request <= 0:
            return None
        requests = self._to_place(known[0], resource) if known[0] else ()
        if len(set(requests)) <= 1:
            requests = ()  # one request for all (or unknown): the record as before
        # PR4: how much preemption could make room for, from the culprit's priority; CAP1:
        # only the nodes the culprit tolerates
        return self.nodes.capacity(resource, request, requests, pod_priority(spec),
                                   spec.get("preemptionPolicy") != "Never",
                                   tolerations_of(spec))

    def _to_place(self, gang: str, resource: str) -> tuple[int, ...]:
        """The requests of ``resource`` (milli-units, largest first) of the gang's pods still
        to place: known, not deleted, unbound, not terminating, not terminated; a pod whose
        requests do not parse is left out. One pass over the known pods, kept until a pod
        event (a storm of failure Events pays it once)."""
        key = (gang, resource)
        known = self.placing.get(key)
        if known is not None:
            return known
        out = []
        for uid, (of, obj) in self.pods.items():
            if of != gang or uid in self.deleted:
                continue
            spec, meta = obj.get("spec") or {}, obj.get("metadata") or {}
            phase = (obj.get("status") or {}).get("phase")
            if spec.get("nodeName") or meta.get("deletionTimestamp") \
                    or phase in ("Succeeded", "Failed"):
                continue
            try:
                value = pod_requests(spec).get(resource, 0)
            except ValueError:
                continue
            if value > 0:
                out.append(value)
        self.placing[key] = answer = tuple(sorted(out, reverse=True))
        return answer

    def expire(self, at: int) -> list[Action]:
        """``Drop("pod-gone")`` for every Event held past its due time: its pod did not show up
        in the pods' list or watch, so it is gone (deleted, or forgotten ``remember_deleted``
        seconds after its deletion). Such Events are no bad input (a relist returns every
        stored Event, also those of pods deleted long ago): counted, not dead-lettered."""
        actions: list[Action] = []
        if self.held_due is None or at < self.held_due:
            self._forget(at)
            return actions  # nothing due: no scan (expire runs once per watch event)
        self.held_due = None
        for name in list(self.held):
            keep = []
            for held in self.held[name]:
                if held.due <= at:
                    involved = held.event.get("involvedObject") or {}
                    meta = held.event.get("metadata") or {}
                    if held.event.get("reason") == PREEMPTED_REASON:
                        actions.append(Drop("preemptor-unknown",
                                            f"Event {meta.get('name', '')}: preemptor {name} of "
                                            f"{involved.get('namespace', '')}/"
                                            f"{involved.get('name', '')} is no gang pod seen"))
                        continue
                    actions.append(Drop("pod-gone", f"Event {meta.get('name', '')}: pod {name} "
                                                    f"(uid {involved.get('uid') or '?'}) is gone"))
                else:
                    keep.append(held)
                    self.held_due = held.due if self.held_due is None \
                        else min(self.held_due, held.due)
            if keep:
                self.held[name] = keep
            else:
                del self.held[name]
        self._forget(at)
        return actions

