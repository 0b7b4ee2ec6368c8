"""The watch producer: Kubernetes list+watch of gang Pods, PodGroups and scheduler Events into
``gang-events`` (``gangstate watch``).

Where it sits: the live source at the head of the pipeline. It lists and watches core/v1 Pods
(server-side field selector ``spec.schedulerName=<name>``), ``scheduling.sigs.k8s.io/v1alpha1``
PodGroups (when the CRD is installed) and core/v1 Events (``involvedObject.kind=Pod,reason=<r>``
for ``FailedScheduling`` and ``Scheduled``), and publishes:
- ``gangstate.kube/v1`` records keyed by gang id (a PodGroup's own ``ns/name``; an Event's key
  is the gang of its involved pod, known from the pods seen);
- ``gangstate.cycle/v1`` records derived from scheduler Events (``producers.watch.scheduler_events``),
  with ``cycle`` null (Events carry no cycle number) and ``source`` naming the Event: its uid and
  count identify the attempt; and from each change of a gang pod's failed ``PodScheduled``
  condition (``producers.watch.conditions``: the same attempts, often before their Events,
  ``source.kind`` ``condition``);
- ``gangstate.tick/v1`` to every partition about once a second: the live source's clock;
- ``gangstate.dead-letter/v1`` for malformed Events only (no involved pod name, no uid).

An Event whose involved pod is not known is held ``hold_events`` seconds (in a live watch an
Event can arrive before its pod's ADDED); if the pod does not show up, the pod is gone (a
re-list returns every stored Event, also those of pods deleted long ago) and the Event is
dropped and counted (``pod-gone``), never dead-lettered: it is not bad input.

Layout: a functional core (``plan_streams``, ``relist_diff``, ``retry_delay``, ``GangRouter``:
pure or deterministic, table-tested) and a thin shell (``Watcher``: one thread per list+watch
stream feeding a bounded queue, one publishing loop). The shell follows client-go's Reflector
(``tools/cache/reflector.go``): list, then watch from the list's resourceVersion with
``allowWatchBookmarks`` and a server-side ``timeoutSeconds`` shorter than the client's read
timeout (a quiet watch receives nothing until the server ends it); on a clean end, a read
timeout (logged at DEBUG only) or a dropped connection (a WARNING, and backoff) resume from the
last resourceVersion seen (bookmarks included); on 410 Gone relist and publish ``SYNC`` for
what exists and ``DELETED`` (last known object) for what vanished meanwhile; failed requests
are retried on ``retry_delay``'s quick schedule, and a 401/403 that lasts ``refused_for``
seconds ends the watch (``Watcher.failure``). The
``kubernetes`` client's own ``watch.Watch.stream`` is not used: it retries a 410 once silently
and cannot relist.

Must not: decide anything about gangs beyond membership (``streams.core.spec.gang_of_pod``),
drop a record without counting it, or read the wall clock except through the injected clock.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import queue
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge

from producers.watch.conditions import changed_condition, condition_attempt, pod_scheduled
from producers.watch.node_cache import NodeCache
from producers.watch.scheduler_events import (PREEMPTED_REASON, Outcome, dominant_fit_reason,
                                              parse_scheduler_event, preempted_by,
                                              preemption_of)
from streams.settings import Settings
from streams.kafka.waiting import backoff_delay  # sends to Kafka; the API server: retry_delay
from streams.wire.contracts import CYCLE_SCHEMA, KUBE_SCHEMA, PREEMPTION_SCHEMA, dead_letter
from streams.core.capacity import pod_requests
from streams.core.spec import (ANNOTATION_MATCH_POLICY_ALIAS, LABEL_MIN_AVAILABLE_DEPRECATED,
                               LABEL_POD_GROUP, LABEL_POD_GROUP_NAME_DEPRECATED, PREFIX,
                               gang_of_pod, parse_spec, settings_of_pod, settings_of_podgroup,
                               waits_for_podgroup)
from streams.core.timefmt import format_time, parse_time

log = logging.getLogger(__name__)

PODGROUP_GROUP, PODGROUP_VERSION, PODGROUP_PLURAL = "scheduling.sigs.k8s.io", "v1alpha1", "podgroups"
DEFAULT_SCHEDULERS = ("koord-scheduler",)
DEFAULT_EVENT_REASONS = ("FailedScheduling", "Scheduled", PREEMPTED_REASON)
"""The Event reasons watched: the scheduler's attempts, and ``Preempted`` on each victim of a
preemption (kube-scheduler v1.35.2 ``framework/preemption/preemption.go:216``), routed to the
preemptor's gang as ``gangstate.preemption/v1``."""
WATCH_TIMEOUT_MARGIN = 5.0
"""Seconds by which the server-side ``timeoutSeconds`` of a watch must undercut the client's
read timeout, so that the API server ends a quiet watch before the client gives up on it."""
_KINDS = {"pods": ("Pod", "v1"), "events": ("Event", "v1"),
          "podgroups": ("PodGroup", f"{PODGROUP_GROUP}/{PODGROUP_VERSION}"),
          "nodes": ("Node", "v1"), "boundpods": ("Pod", "v1")}
CAPACITY_RESOURCES = ("nodes", "boundpods")
"""Streams that only feed the per-node cache (``node_cache.NodeCache``): Nodes, and every
pod bound to a node (any scheduler's: they hold what the gang's members would need)."""


GANG_LABELS = (LABEL_POD_GROUP, LABEL_POD_GROUP_NAME_DEPRECATED,
               LABEL_MIN_AVAILABLE_DEPRECATED)
"""The pod labels the fold reads (``streams.core.spec``: ``gang_of_pod``,
``waits_for_podgroup``, ``settings_of_pod``); every other label stays out of ``gang-events``."""
PUBLISHED_META = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp",
                  "deletionTimestamp")
"""The ``metadata`` fields of a published Pod or PodGroup besides its gang labels and
annotations (docs/contracts.md, "The published Pod and PodGroup")."""


def _gang_annotation(key: str) -> bool:
    """An annotation the fold reads: Koordinator's ``gang.scheduling.koordinator.sh/*`` and the
    ``pod-group.scheduling.sigs.k8s.io/match-policy`` alias (``streams.core.spec``)."""
    return key.startswith(PREFIX) or key == ANNOTATION_MATCH_POLICY_ALIAS


def published(resource: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The slimmed Pod or PodGroup that a ``gangstate.kube/v1`` record carries: exactly what
    the fold reads (docs/contracts.md, "The published Pod and PodGroup"), so that container
    env values, commands, images, volumes, other labels and annotations (such as
    ``kubectl.kubernetes.io/last-applied-configuration``, a copy of the whole manifest) never
    reach ``gang-events``:

    - both: ``apiVersion``, ``kind``, ``metadata.{name, namespace, uid, resourceVersion,
      creationTimestamp, deletionTimestamp}`` (those present) and the gang annotations
      (``gang.scheduling.koordinator.sh/*``, ``pod-group.scheduling.sigs.k8s.io/match-policy``);
    - a Pod: the gang labels (``GANG_LABELS``), ``spec.{nodeName, schedulingGates}`` and
      ``status.{phase, reason, nominatedNodeName}`` (those set; ``reason``: ``Evicted`` for a pod the kubelet evicted);
    - a PodGroup: ``spec.{minMember, scheduleTimeoutSeconds}``.

    Other resources (core/v1 Events) pass unchanged. Pure."""
    if resource not in ("pods", "podgroups"):
        return obj
    meta = obj.get("metadata") or {}
    out_meta: dict[str, Any] = {k: meta[k] for k in PUBLISHED_META if k in meta}
    if resource == "pods":
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k in GANG_LABELS}
        if labels:
            out_meta["labels"] = labels
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if _gang_annotation(k)}
    if annotations:
        out_meta["annotations"] = annotations
    out: dict[str, Any] = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    out["metadata"] = out_meta
    spec = obj.get("spec") or {}
    if resource == "pods":
        out["spec"] = {k: spec[k] for k in ("nodeName", "schedulingGates") if k in spec}
        status = obj.get("status") or {}
        out["status"] = {k: status[k] for k in ("phase", "reason", "nominatedNodeName")
                         if status.get(k)}
    else:
        out["spec"] = {k: spec[k] for k in ("minMember", "scheduleTimeoutSeconds")
                       if k in spec}
    return out


def _requests(containers: Any) -> list[dict[str, Any]]:
    """Containers reduced to their resource requests (and an init container's
    ``restartPolicy``, which makes it a sidecar: ``streams.core.capacity.pod_requests``)."""
    return [{"resources": {"requests": (c.get("resources") or {}).get("requests") or {}},
             **({"restartPolicy": c["restartPolicy"]} if "restartPolicy" in c else {})}
            for c in containers or []]


def slim(resource: str, obj: dict[str, Any]) -> dict[str, Any]:
    """What the watcher keeps of an object it lists or watches, so that its memory for a large
    cluster stays small and nothing it does not need (env values above all) is held:

    - a Node or a bound Pod: only what the per-node cache reads (name, uid, resourceVersion; a
      Node's ``spec.unschedulable``, taints and ``status.allocatable``; a Pod's node, container
      and init-container requests, overhead and phase), and a bound Pod's grace period
      (``spec.terminationGracePeriodSeconds``, ``metadata.deletionGracePeriodSeconds`` and
      ``deletionTimestamp``) for the records of a preemption (``GangRouter``);
    - a gang Pod or a PodGroup: its ``published`` shape; a Pod also keeps its containers'
      requests and overhead, which the capacity facts of its cycle records need
      (``GangRouter``), its ``spec.schedulerName`` and its ``PodScheduled`` condition
      (``pod_scheduled``: the condition records' source), which ``published`` leaves out of
      ``gang-events``.

    core/v1 Events pass unchanged. Pure."""
    if resource == "podgroups":
        return published(resource, obj)
    if resource == "pods":
        out = published(resource, obj)
        spec = obj.get("spec") or {}
        out["spec"] = {**out["spec"], "containers": _requests(spec.get("containers")),
                       "initContainers": _requests(spec.get("initContainers")),
                       **({"overhead": spec["overhead"]} if spec.get("overhead") else {}),
                       **({"schedulerName": spec["schedulerName"]}
                          if spec.get("schedulerName") else {})}
        scheduled = pod_scheduled(obj)
        if scheduled is not None:  # the condition records' source (GangRouter)
            out["status"] = {**out["status"], "conditions": [scheduled]}
        return out
    if resource not in CAPACITY_RESOURCES:
        return obj
    meta = obj.get("metadata") or {}
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    out: dict[str, Any] = {"metadata": {k: meta[k] for k in ("name", "namespace", "uid",
                                                             "resourceVersion") if k in meta}}
    if resource == "nodes":
        out["spec"] = {k: spec[k] for k in ("unschedulable", "taints") if k in spec}
        out["status"] = {"allocatable": status.get("allocatable") or {}}
        return out

    for key in ("deletionTimestamp", "deletionGracePeriodSeconds"):
        if meta.get(key) is not None:
            out["metadata"][key] = meta[key]
    out["spec"] = {"nodeName": spec.get("nodeName"),
                   **({"terminationGracePeriodSeconds": spec["terminationGracePeriodSeconds"]}
                      if spec.get("terminationGracePeriodSeconds") is not None else {}),
                   "containers": _requests(spec.get("containers")),
                   "initContainers": _requests(spec.get("initContainers")),
                   **({"overhead": spec["overhead"]} if spec.get("overhead") else {})}
    out["status"] = {"phase": status.get("phase")}
    return out


def wall_clock_micros() -> int:
    """The default clock: microseconds since the Unix epoch, wall time."""
    return time.time_ns() // 1000


# ---------------------------------------------------------------------------------------------
# Configuration and stream plan (pure)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WatchConfig:
    """What to watch and how patiently. Times in seconds.

    ``namespaces``: empty = all namespaces. ``scheduler_names``: pods of these schedulers only
    (one server-side field selector each). ``event_reasons``: Event reasons turned into cycle
    records. ``watch_timeout``: the server-side ``timeoutSeconds`` of one watch request, after
    which the API server ends it cleanly and the watcher resumes; ``connect_timeout``/
    ``read_timeout``: the client-side ``_request_timeout`` (a socket idle longer than
    ``read_timeout`` counts as dead). A watch of a quiet resource receives nothing at all
    until its ``timeoutSeconds`` (the API server sends bookmarks only as the resource's
    resourceVersion moves), so ``watch_timeout`` must end it first: ``read_timeout`` must
    exceed ``watch_timeout`` by ``WATCH_TIMEOUT_MARGIN`` (a ``ValueError`` otherwise), and
    ``watch_timeout`` must be at least 1 (``timeoutSeconds`` 0 means the server's default,
    1800-3600 s: ``k8s.io/apiserver`` v0.35.2, the library of kube-apiserver v1.35.2,
    ``pkg/endpoints/handlers/get.go:255-261``; the watch ends when that timer fires,
    ``pkg/endpoints/handlers/watch.go:257,291``). client-go v0.35.2's Reflector asks for a
    random 5-10 min with no read timeout (``tools/cache/reflector.go:53-55,525``); this
    watcher keeps a read timeout to notice a connection a middlebox dropped silently, hence
    the shorter default. ``backoff_base``/``backoff_cap``: exponential backoff with full jitter
    between failed sends to Kafka. ``retry_base``/``retry_cap``: the retry schedule of a
    list or watch the API server refused or did not answer (``retry_delay``: quick at first,
    so that the watch is back within seconds of an API server restart). ``refused_for``: how
    long 401 and 403 answers are retried (an API server just restarted answers 403 until its
    authorizer is warm) before the watch gives up with one line (``Watcher.failure``).
    ``tick_interval``: seconds between ticks (``None``: no ticks).
    ``queue_size``: bound of the records waiting to be published; a full queue stops the
    watches reading (backpressure). ``hold_events``: how long an Event whose pod is not known
    yet waits for the pod before it is dropped as ``pod-gone``. ``remember_deleted``: how long
    a deleted pod's gang is kept for late Events. ``crd_recheck``: how often a missing
    PodGroup CRD is looked for again (reported once). ``capacity``: also list+watch Nodes and
    the pods bound to them, cluster-wide (slimmed to what the per-node cache reads), so that
    the cycle records of a gang short of a resource carry the cluster's room for it.
    """

    namespaces: tuple[str, ...] = ()
    scheduler_names: tuple[str, ...] = DEFAULT_SCHEDULERS
    event_reasons: tuple[str, ...] = DEFAULT_EVENT_REASONS
    podgroups: bool = True
    capacity: bool = True
    page_size: int = 500
    watch_timeout: int = 60
    connect_timeout: float = 10.0
    read_timeout: float = 90.0
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    retry_base: float = 0.2
    retry_cap: float = 2.0
    refused_for: float = 10.0
    tick_interval: float | None = 1.0
    flush_interval: float = 1.0
    queue_size: int = 1000
    hold_events: float = 10.0
    remember_deleted: float = 600.0
    crd_recheck: float = 300.0

    def __post_init__(self) -> None:
        if self.watch_timeout < 1:
            raise ValueError(f"the watch timeout (--watch-timeout) must be at least 1 s, not "
                             f"{self.watch_timeout}: timeoutSeconds 0 lets the API server keep "
                             f"a quiet watch open 30-60 min, far past the read timeout")
        if self.read_timeout < self.watch_timeout + WATCH_TIMEOUT_MARGIN:
            raise ValueError(
                f"the read timeout (--read-timeout {self.read_timeout:g}) must exceed the watch "
                f"timeout (--watch-timeout {self.watch_timeout}) by at least "
                f"{WATCH_TIMEOUT_MARGIN:g} s: the API server sends nothing on a quiet watch until "
                f"timeoutSeconds ends it, so a shorter read timeout would cut every quiet watch")


@dataclass(frozen=True)
class StreamSpec:
    """One list+watch stream: ``resource`` (``pods``, ``podgroups``, ``events``), a namespace
    (``None`` = all) and a server-side field selector."""

    resource: str
    namespace: str | None
    field_selector: str

    @property
    def name(self) -> str:
        """A label for logs: ``pods[ns=*,spec.schedulerName=koord-scheduler]``."""
        return f"{self.resource}[ns={self.namespace or '*'},{self.field_selector}]"


def plan_streams(config: WatchConfig) -> list[StreamSpec]:
    """The streams to run, pods first (Events need the pods' gangs). Field selectors cannot OR
    values (Kubernetes ``fields.Selector``), so there is one pod stream per scheduler name and
    one Event stream per reason, each per namespace. Supported selectors: Pod
    ``spec.schedulerName``, Event ``involvedObject.kind`` and ``reason``
    (``pkg/registry/core/{pod,event}/strategy.go``). Pure."""
    namespaces: Sequence[str | None] = config.namespaces or (None,)
    streams = [StreamSpec("pods", ns, f"spec.schedulerName={name}")
               for ns in namespaces for name in config.scheduler_names]
    if config.podgroups:
        streams += [StreamSpec("podgroups", ns, "") for ns in namespaces]
    if config.capacity:  # the room a gang needs is cluster-wide, whatever the namespaces
        streams += [StreamSpec("nodes", None, ""), StreamSpec("boundpods", None,
                                                               "spec.nodeName!=")]
    streams += [StreamSpec("events", ns, f"involvedObject.kind=Pod,reason={reason}")
                for ns in namespaces for reason in config.event_reasons]
    return streams


# ---------------------------------------------------------------------------------------------
# Pure helpers
# ---------------------------------------------------------------------------------------------

def relist_diff(known: Mapping[str, dict[str, Any]],
                listed: Sequence[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """What a relist means as watch events: ``SYNC`` for every listed object (in list order),
    then ``DELETED`` with the last known object for every known uid the list no longer holds
    (sorted by namespace/name), so a consumer that missed a deletion while the watch was gone
    still learns it (client-go ``DeltaFIFO.Replace`` does the same with ``DeletedFinalStateUnknown``).
    ``known``: uid -> last object seen; ``listed``: the list's items. Pure."""
    out: list[tuple[str, dict[str, Any]]] = [("SYNC", obj) for obj in listed]
    present = {obj["metadata"]["uid"] for obj in listed}
    vanished = [obj for uid, obj in known.items() if uid not in present]
    vanished.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
    out += [("DELETED", obj) for obj in vanished]
    return out


def retry_delay(attempt: int, rand: float, base: float = 0.2, cap: float = 2.0) -> float:
    """Seconds before retry ``attempt`` (0-based) of a list or watch after a refusal, a server
    error or a refused connection: ``d = min(cap, base * 2**attempt)`` with "equal jitter",
    ``d / 2 + rand * d / 2`` (``rand`` uniform in [0, 1)): 0.1-0.2 s, 0.2-0.4, 0.4-0.8,
    0.8-1.6, then 1-2 s with the defaults. Quick at first and capped low, so that the watch is
    back within about 2 s of an API server's return (measured: backoff to a 30 s cap cost 26 s
    of blindness after a restart), never below half the step (the streams of one watcher do
    not all hit a server that is starting in the same instant); at the cap a watcher's 6
    streams ask a down server about 4 times a second. Pure."""
    step = min(cap, base * 2.0 ** min(attempt, 30))
    return step / 2 + rand * step / 2


def event_count(event: Mapping[str, Any]) -> int:
    """How often a core/v1 Event has happened: ``series.count`` (events.k8s.io/v1 Events, as the
    scheduler's recorder writes them, count their repeats there: client-go
    ``tools/events/event_broadcaster.go:178-182``), else ``count`` (the legacy recorder), else 1
    (``k8s.io/api`` v0.35.2 ``core/v1/types.go:7549-7551,7584-7586``). Values that are not
    positive integers count as absent. Pure."""
    for value in ((event.get("series") or {}).get("count"), event.get("count")):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
    return 1


def kube_record(resource: str, type_: str, obj: dict[str, Any], at: int) -> dict[str, Any]:
    """A ``gangstate.kube/v1`` record at event time ``at`` (microseconds); a Pod or PodGroup
    goes in its ``published`` shape, whoever built ``obj`` (the watch streams, a dump)."""
    return {"schema": KUBE_SCHEMA, "observed_at": format_time(at), "resource": resource,
            "type": type_, "object": published(resource, obj)}


def gang_group_of(gang: str, pod: Mapping[str, Any],
                  podgroup: Mapping[str, Any] | None) -> str:
    """The gang group id of ``gang`` as the scheduler would compute it from what is known: the
    PodGroup's ``groups`` annotation for pods that wait for their PodGroup, else the pod's;
    the gang itself when the spec cannot be initialised (``streams.core.spec.parse_spec``). Pure."""
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


# ---------------------------------------------------------------------------------------------
# Routing: watch events -> actions (deterministic given its state; no I/O, no clock)
# ---------------------------------------------------------------------------------------------

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


@dataclass
class GangRouter:
    """Turns watch events into actions, remembering which gang each pod uid belongs to.

    ``route(resource, type, obj, prev, at)`` -> actions; ``expire(at)`` -> ``Drop("pod-gone")``
    for Events held past ``hold_events`` seconds without their pod. ``at`` is event time in
    microseconds (the watcher's clock). Deterministic: same calls, same actions.
    """

    scheduler_names: tuple[str, ...] = DEFAULT_SCHEDULERS
    event_reasons: tuple[str, ...] = DEFAULT_EVENT_REASONS
    hold_events: float = 10.0
    remember_deleted: float = 600.0
    pods: dict[str, tuple[str | None, dict[str, Any]]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # "ns/name" -> uid
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

    def route(self, resource: str, type_: str, obj: dict[str, Any],
              prev: dict[str, Any] | None, at: int) -> list[Action]:
        """Actions for one watch event (``type_`` ADDED/MODIFIED/DELETED/SYNC) of ``obj``;
        ``prev`` is the stream's last known state of the same uid (``None`` if new).
        ``nodes`` and ``boundpods`` (pods of any scheduler bound to a node) only feed the
        per-node cache (``node_cache.NodeCache``) whose room the cycle records of a gang short
        of a resource carry; they publish nothing."""
        if resource == "nodes":
            self.nodes.node(type_, obj)
            return []
        if resource == "boundpods":
            self.nodes.pod(type_, obj)
            return self._bound_pod(type_, obj, at)
        if resource == "pods":
            return self._pod(type_, obj, prev, at) + self._victim_gone(type_, obj, at)
        if resource == "podgroups":
            meta = obj["metadata"]
            key = f"{meta.get('namespace', '')}/{meta['name']}"
            if type_ == "DELETED":
                self.podgroups.pop(key, None)
            else:
                self.podgroups[key] = obj
            return [Publish(key, kube_record("podgroups", type_, obj, at))]
        return self._event(type_, obj, at)

    def _pod(self, type_: str, obj: dict[str, Any], prev: dict[str, Any] | None,
             at: int) -> list[Action]:
        meta = obj["metadata"]
        ns, uid = meta.get("namespace", ""), meta["uid"]
        gang = gang_of_pod(ns, meta.get("labels") or {}, meta.get("annotations") or {})
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
            due = at + int(self.hold_events * 1e6) if due is None else due
            self.held.setdefault(key, []).append(_Held(due, type_, event, at))
            self.held_due = due if self.held_due is None else min(self.held_due, due)
            return []
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

    def _forget(self, at: int) -> None:
        for uid in [u for u, until in self.deleted.items() if until <= at]:
            del self.deleted[uid]
            gang, obj = self.pods.pop(uid, (None, {}))
            meta = obj.get("metadata") or {}
            name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
            if self.names.get(name) == uid:
                del self.names[name]

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
            due = at + int(self.hold_events * 1e6) if due is None else due
            self.held.setdefault(f"{ns}/{name}", []).append(_Held(due, type_, event, at))
            self.held_due = due if self.held_due is None else min(self.held_due, due)
            return []
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
            # the pod is being deleted and was not attempted; the Event is still published
            return actions + [Drop("not-an-attempt")]
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
            return [Drop("not-an-attempt")]
        source = {"kind": "condition", "uid": condition_attempt(uid, condition), "count": 1,
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
        ``parsed``, ``form`` and ``truncated``); ``capacity`` from the node cache."""
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
        return cycle

    def _capacity(self, namespace: str, culprit: str | None,
                  fit_error: str | None) -> dict[str, Any] | None:
        """The node cache's room for the culprit's short resource: the dominant reason of its
        fit error must be ``Insufficient <resource>`` (kube-scheduler v1.35.2
        ``framework/plugins/noderesources/fit.go:649-735``) and the culprit a known pod with
        a request of it; ``None`` otherwise or while no node is known."""
        reason = dominant_fit_reason(fit_error or "")
        if not culprit or not reason or not reason.startswith("Insufficient "):
            return None
        resource = reason[len("Insufficient "):]
        uid = self.names.get(culprit if "/" in culprit else f"{namespace}/{culprit}")
        known = self.pods.get(uid) if uid else None
        if known is None:
            return None
        try:
            request = pod_requests((known[1].get("spec") or {})).get(resource, 0)
        except ValueError:
            return None
        if request <= 0:
            return None
        requests = self._to_place(known[0], resource) if known[0] else ()
        if len(set(requests)) <= 1:
            requests = ()  # one request for all (or unknown): the record as before
        return self.nodes.capacity(resource, request, requests)

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


# ---------------------------------------------------------------------------------------------
# The shell
# ---------------------------------------------------------------------------------------------

class RecordSink(Protocol):
    """What the watcher publishes through (``streams.kafka.publishing.Publisher`` or a test double)."""

    def send_json(self, topic: str, key: str | None, record: dict[str, Any],
                  partition: int | None = None) -> None: ...

    def flush(self) -> None: ...


class ApiError(Exception):
    """A non-2xx answer of the API server: ``code`` (HTTP status) and the Status ``reason``."""

    def __init__(self, code: int, reason: str, message: str = "") -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code, self.reason = code, reason


class Metrics:
    """The watcher's Prometheus metrics, in their own registry (names ``gangstate_watch_*``)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.published = Counter("gangstate_watch_records_published",
                                 "Records handed to Kafka, by schema and resource",
                                 ["schema", "resource"], registry=r)
        self.dropped = Counter("gangstate_watch_records_dropped",
                               "Watch events deliberately not published, or records lost, "
                               "by reason", ["reason"], registry=r)
        self.dead_letters = Counter("gangstate_watch_dead_letters",
                                    "Records sent to the dead-letters topic, by reason",
                                    ["reason"], registry=r)
        self.relists = Counter("gangstate_watch_relists",
                               "Relists after 410 Gone or a resync, by resource",
                               ["resource"], registry=r)
        self.restarts = Counter("gangstate_watch_restarts",
                                "Watch requests ended and resumed, by resource and cause",
                                ["resource", "cause"], registry=r)
        self.publish_retries = Counter("gangstate_watch_publish_retries",
                                       "Sends retried because Kafka was unavailable",
                                       registry=r)
        self.queue_depth = Gauge("gangstate_watch_queue_depth",
                                 "Watch events waiting to be published", registry=r)
        self.crd_missing = Gauge("gangstate_watch_podgroup_crd_missing",
                                 "1 while the PodGroup CRD is not installed", registry=r)

    def value(self, name: str, **labels: str) -> float:
        """Current value of a sample (``gangstate_watch_relists_total``...), 0 when absent."""
        return self.registry.get_sample_value(name, labels) or 0.0


class _Gone(Exception):
    """410 Gone: the resourceVersion is too old; relist."""


class _Silent(Exception):
    """An open watch received nothing for ``read_timeout`` seconds (the client's read timed
    out): resume it, as after a clean end."""


@dataclass
class _Item:
    resource: str
    type: str
    obj: dict[str, Any]
    prev: dict[str, Any] | None


class _Stream(threading.Thread):
    """One list+watch loop (client-go Reflector ``ListAndWatch``) feeding the watcher's queue."""

    def __init__(self, watcher: "Watcher", spec: StreamSpec) -> None:
        super().__init__(name=f"watch {spec.name}", daemon=True)
        self.w, self.spec = watcher, spec
        self.known: dict[str, dict[str, Any]] = {}
        self.resource_version: str | None = None
        self.synced = threading.Event()
        self.resync = threading.Event()
        self._resp: Any = None
        self._crd_reported = False
        self._attempt = 0  # failed requests in a row (retry_delay's attempt)
        self._refused_since: float | None = None  # first 401/403 in a row (monotonic)
        self._unreachable = False  # the last failure was a connection error
        self._verb = "list"  # of the request under way, for the one line of a refusal

    # -- API calls -----------------------------------------------------------------------------
    def _call(self, **kwargs: Any) -> Any:
        """One list or watch request; raises ``ApiError`` for any non-2xx answer."""
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self._request(**kwargs)
        except ApiException as err:
            reason, message = err.reason or "", ""
            try:
                body = json.loads(err.body or "{}")
                reason, message = body.get("reason", reason), body.get("message", "")
            except (ValueError, TypeError, AttributeError):
                pass
            raise ApiError(int(err.status or 0), reason, message) from None
        if not 200 <= resp.status < 300:
            try:
                body = json.loads(resp.data or b"{}")
            except ValueError:
                body = {}
            finally:
                resp.release_conn()
            raise ApiError(resp.status, body.get("reason", ""), body.get("message", ""))
        return resp

    def _request(self, **kwargs: Any) -> Any:
        from kubernetes import client

        spec, api = self.spec, self.w.api_client
        kwargs["_preload_content"] = False
        if spec.field_selector:
            kwargs["field_selector"] = spec.field_selector
        if spec.resource == "podgroups":
            custom = client.CustomObjectsApi(api)
            args = (PODGROUP_GROUP, PODGROUP_VERSION)
            if spec.namespace:
                resp = custom.list_namespaced_custom_object(*args, spec.namespace,
                                                            PODGROUP_PLURAL, **kwargs)
            else:
                resp = custom.list_cluster_custom_object(*args, PODGROUP_PLURAL, **kwargs)
        elif spec.resource == "nodes":
            resp = client.CoreV1Api(api).list_node(**kwargs)
        else:
            core = client.CoreV1Api(api)
            name = "event" if spec.resource == "events" else "pod"
            if spec.namespace:
                resp = getattr(core, f"list_namespaced_{name}")(spec.namespace, **kwargs)
            else:
                resp = getattr(core, f"list_{name}_for_all_namespaces")(**kwargs)
        return resp

    def _timeouts(self) -> tuple[float, float]:
        return (self.w.config.connect_timeout, self.w.config.read_timeout)

    def _answered(self) -> None:
        """The API server answered a request: the next failure starts the retry schedule
        afresh, and a 401/403 counts as the first in a row."""
        self._attempt, self._refused_since, self._unreachable = 0, None, False

    def _list(self) -> tuple[list[dict[str, Any]], str]:
        self._verb = "list"
        items: list[dict[str, Any]] = []
        token: str | None = None
        kind, api_version = _KINDS[self.spec.resource]
        while True:
            kwargs: dict[str, Any] = {"limit": self.w.config.page_size,
                                      "_request_timeout": self._timeouts()}
            if token:
                kwargs["_continue"] = token
            try:
                resp = self._call(**kwargs)
            except ApiError as err:
                if err.code == 410 and token:  # continue token expired: restart the list
                    items, token = [], None
                    continue
                raise
            body = json.loads(resp.data)
            resp.release_conn()
            for obj in body.get("items") or []:
                # built-in list items carry no kind/apiVersion; watch events do
                obj.setdefault("apiVersion", api_version)
                obj.setdefault("kind", kind)
                items.append(obj)
            meta = body.get("metadata") or {}
            token = meta.get("continue") or None
            if token is None:
                self._answered()
                return items, str(meta.get("resourceVersion", ""))

    def _watch(self) -> Iterator[dict[str, Any]]:
        from kubernetes.watch.watch import iter_resp_lines
        from urllib3.exceptions import ReadTimeoutError

        config = self.w.config
        self._verb = "watch"
        try:
            resp = self._call(watch=True, resource_version=self.resource_version,
                              allow_watch_bookmarks=True, timeout_seconds=config.watch_timeout,
                              _request_timeout=self._timeouts())
        except ApiError as err:
            if err.code == 410:
                raise _Gone(str(err)) from None
            raise
        self._answered()
        self._resp = resp
        try:
            lines = iter_resp_lines(resp)
            while True:
                try:
                    line = next(lines)
                except StopIteration:
                    return
                except ReadTimeoutError as err:  # only while streaming: the server answered
                    raise _Silent(str(err)) from None
                if not line.strip():
                    continue
                yield json.loads(line)
                if self.w.stopping.is_set() or self.resync.is_set():
                    return
        finally:
            self._resp = None
            resp.release_conn()

    def abort(self) -> None:
        """Cut the open watch connection so that a blocked read returns now."""
        resp = self._resp
        if resp is not None:
            try:
                resp.shutdown()
            except Exception:  # noqa: BLE001 - best effort on a connection being torn down
                pass

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> None:
        """List, then watch, until the watcher stops. A failed request is retried on
        ``retry_delay``'s schedule (restarted by a list or watch served, and by the first
        error answer after connection errors); a 410 Gone
        relists at once, whatever failed before it; a 401 or 403 is retried for
        ``refused_for`` seconds in a row, then the watcher gives up with one line."""
        w, resource = self.w, self.spec.resource
        need_list, listed_once = True, False
        while not w.stopping.is_set():
            try:
                if need_list or self.resync.is_set():
                    self.resync.clear()
                    items, rv = self._list()
                    if listed_once:
                        w.metrics.relists.labels(resource).inc()
                    items = [slim(resource, o) for o in items]
                    for type_, obj in relist_diff(self.known, items):
                        uid = obj["metadata"]["uid"]
                        w.enqueue(_Item(resource, type_, obj, self.known.get(uid)))
                    self.known = {o["metadata"]["uid"]: o for o in items}
                    self.resource_version, need_list, listed_once = rv, False, True
                    if self._crd_reported:
                        log.info("%s: the PodGroup CRD is installed now", self.spec.name)
                        self._crd_reported = False
                        w.metrics.crd_missing.set(0)
                    self.synced.set()
                with contextlib.closing(self._watch()) as events:
                    for event in events:
                        type_, obj = event.get("type"), event.get("object") or {}
                        if type_ == "BOOKMARK":
                            self.resource_version = (obj.get("metadata") or {}).get(
                                "resourceVersion") or self.resource_version
                            continue
                        if type_ == "ERROR":
                            if obj.get("code") == 410:
                                raise _Gone(obj.get("message", ""))
                            raise ApiError(int(obj.get("code") or 500), obj.get("reason", ""),
                                           obj.get("message", ""))
                        obj = slim(resource, obj)
                        meta = obj.get("metadata") or {}
                        uid = meta.get("uid")
                        if not uid or type_ not in ("ADDED", "MODIFIED", "DELETED"):
                            continue
                        if type_ == "DELETED":
                            prev = self.known.pop(uid, None)
                        else:
                            prev = self.known.get(uid)
                            self.known[uid] = obj
                        self.resource_version = (meta.get("resourceVersion")
                                                 or self.resource_version)
                        w.enqueue(_Item(resource, type_, obj, prev))
                if not w.stopping.is_set():
                    w.metrics.restarts.labels(resource, "closed").inc()
            except _Gone as err:
                # at once, without the retry schedule: the list is what brings the watch back
                log.info("%s: 410 Gone (%s): relisting", self.spec.name, err)
                w.metrics.restarts.labels(resource, "gone").inc()
                need_list = True
            except _Silent as err:
                # normal: a server that did not end the watch at timeoutSeconds, or a connection
                # dropped on the way; resume from the last resourceVersion, no backoff
                w.metrics.restarts.labels(resource, "read-timeout").inc()
                log.debug("%s: nothing received for %g s (%s); resuming", self.spec.name,
                          w.config.read_timeout, err)
            except ApiError as err:
                if self._unreachable:
                    # the server answers again (a restart: it now refuses until it is warm):
                    # the schedule starts afresh
                    self._attempt, self._unreachable = 0, False
                if err.code == 404 and resource == "podgroups":
                    if not self._crd_reported:
                        log.warning("%s: the PodGroup CRD (%s/%s) is not installed; PodGroups "
                                    "are not watched (looking again every %.0f s)",
                                    self.spec.name, PODGROUP_GROUP, PODGROUP_VERSION,
                                    w.config.crd_recheck)
                        self._crd_reported = True
                        w.metrics.crd_missing.set(1)
                    self.synced.set()
                    w.stopping.wait(w.config.crd_recheck)
                    continue
                limit = None
                if err.code in (401, 403):
                    # an API server just (re)started refuses until its authenticator and
                    # authorizer are ready (measured: 403 "cannot watch resource events" right
                    # after a restart); refused for refused_for seconds in a row, it is
                    # credentials or RBAC, not a passing fault
                    now = time.monotonic()
                    if self._refused_since is None:
                        self._refused_since = now
                    left = self._refused_since + w.config.refused_for - now
                    if left <= 0:
                        w.fail(self._refused(err))
                        break
                    limit = left
                self._failed(err, "api-error", limit=limit)
            except Exception as err:  # noqa: BLE001 - network errors of every kind: retry
                if w.stopping.is_set():
                    break
                self._unreachable = True
                self._failed(err, "connection", unreachable=True)

    def _refused(self, err: ApiError) -> str:
        """The one line for 401 or 403 answers to this stream's list (or watch) for
        ``refused_for`` seconds in a row."""
        host = getattr(getattr(self.w.api_client, "configuration", None), "host", "?")
        group = PODGROUP_GROUP if self.spec.resource == "podgroups" else ""
        resource = "pods" if self.spec.resource == "boundpods" else self.spec.resource
        if err.code == 401:
            return (f"the API server at {host} does not accept the kubeconfig's credentials "
                    f"(401 {err.reason}); renew them or choose another --context")
        scope = f"in namespace {self.spec.namespace}" if self.spec.namespace else "cluster-wide"
        doing = "listing" if self._verb == "list" else "watching"
        return (f"the API server at {host} forbids {doing} {resource} (API group {group!r}) "
                f"{scope} (403 {err.reason}); grant the watch's user or ServiceAccount "
                f"list and watch on it (deploy/kubernetes/rbac.yaml)")

    def _failed(self, err: Exception, cause: str, unreachable: bool = False,
                limit: float | None = None) -> None:
        """Count, log and wait out one failed request (``retry_delay``, at most ``limit``
        seconds)."""
        w = self.w
        w.metrics.restarts.labels(self.spec.resource, cause).inc()
        delay = retry_delay(self._attempt, w.rand(), w.config.retry_base, w.config.retry_cap)
        if limit is not None:
            delay = min(delay, limit)
        if unreachable:  # one short line: urllib3's MaxRetryError repeats the whole URL
            host = getattr(getattr(w.api_client, "configuration", None), "host", "?")
            log.warning("%s: cannot reach the API server at %s (%s); retrying in %.2f s",
                        self.spec.name, host, _short(err), delay)
        else:
            log.warning("%s: %s (%s); retrying in %.2f s", self.spec.name, cause,
                        str(err)[:200], delay)
        w.stopping.wait(delay)
        self._attempt += 1


def _short(err: Exception) -> str:
    """A connection error in a few words: urllib3's ``MaxRetryError`` by its reason without
    the connection's repr (``Failed to establish a new connection: [Errno 111] Connection
    refused``), anything else as ``Type: message`` (200 characters at most). Pure."""
    reason = getattr(err, "reason", None)
    text = " ".join(str(reason if isinstance(reason, Exception) else err).split())
    if text.startswith(("HTTPConnection(", "HTTPSConnection(", "<")) and "): " in text:
        text = text.split("): ", 1)[1]
    return f"{type(err).__name__}: {text}"[:200]


class Watcher:
    """List+watch streams -> ``GangRouter`` -> ``sink`` (``gang-events``, ``dead-letters``).

    ``api_client``: a ``kubernetes.client.ApiClient``. ``sink``: a ``Publisher`` or any
    ``RecordSink``; ticks are sent when it has ``tick_all_partitions`` and
    ``config.tick_interval`` is set. ``clock``: event time in microseconds for ``observed_at``
    (default wall clock). ``run()`` blocks until ``stop()`` (or SIGTERM/SIGINT via
    ``run_watch``); ``start()``/``stop()`` run it in a background thread for tests.
    """

    def __init__(self, api_client: Any, sink: RecordSink, settings: Settings,
                 config: WatchConfig = WatchConfig(), *,
                 clock: Callable[[], int] = wall_clock_micros,
                 metrics: Metrics | None = None,
                 rand: Callable[[], float] = random.random) -> None:
        self.api_client, self.sink, self.settings, self.config = api_client, sink, settings, config
        self.clock, self.rand = clock, rand
        self.metrics = metrics or Metrics()
        self.router = GangRouter(config.scheduler_names, config.event_reasons,
                                 config.hold_events, config.remember_deleted)
        self.queue: queue.Queue[_Item] = queue.Queue(maxsize=config.queue_size)
        self.stopping = threading.Event()
        self.streams = [_Stream(self, spec) for spec in plan_streams(config)]
        self._thread: threading.Thread | None = None
        self._published_failed = 0
        self.failure: str | None = None
        """Why the watch gave up (401 or 403 answers for ``refused_for`` seconds in a row),
        one line; ``None`` while it has not: ``run()`` then returns, and ``gangstate watch``
        exits 1 with it."""

    def fail(self, reason: str) -> None:
        """Give up: record ``reason`` (the first one wins) and stop."""
        if self.failure is None:
            self.failure = reason
        self.stopping.set()

    # -- producer side (stream threads) --------------------------------------------------------
    def enqueue(self, item: _Item) -> None:
        """Hand one watch event to the publishing loop; blocks while the queue is full (the
        watch stops reading: backpressure), returns early only when stopping."""
        while not self.stopping.is_set():
            try:
                self.queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue
        self.metrics.dropped.labels("shutdown").inc()

    def synced(self, timeout: float | None = None) -> bool:
        """Wait until every stream has finished its first list (or found its CRD missing)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for stream in self.streams:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not stream.synced.wait(left):
                return False
        return True

    # -- publishing loop -----------------------------------------------------------------------
    def _send(self, topic: str, key: str | None, record: dict[str, Any],
              partition: int | None = None) -> bool:
        attempt = 0
        while True:
            try:
                self.sink.send_json(topic, key, record, partition)
                return True
            except Exception as err:  # noqa: BLE001 - kafka-python raises KafkaTimeoutError etc.
                if self.stopping.is_set():
                    self.metrics.dropped.labels("shutdown").inc()
                    return False
                self.metrics.publish_retries.inc()
                delay = backoff_delay(attempt, self.config.backoff_base,
                                      self.config.backoff_cap, self.rand())
                log.warning("publishing to %s failed (%s); retrying in %.2f s", topic, err, delay)
                self.stopping.wait(delay)
                attempt += 1

    def _perform(self, actions: Iterable[Action]) -> None:
        topics = self.settings.topics
        for action in actions:
            if isinstance(action, Publish):
                resource = action.record.get("resource", "")
                if self._send(topics.gang_events, action.key, action.record):
                    self.metrics.published.labels(action.record["schema"], resource).inc()
            elif isinstance(action, Drop):
                self.metrics.dropped.labels(action.reason).inc()
                if action.detail:
                    log.debug("dropped (%s): %s", action.reason, action.detail)
            else:
                letter = dead_letter(  # the head, size and sha256 of the value: it fits
                    format_time(wall_clock_micros()), topics.gang_events, None, None, None,
                    json.dumps(action.record, separators=(",", ":")).encode(), action.error)
                if self._send(topics.dead_letters, None, letter):
                    self.metrics.dead_letters.labels(action.reason).inc()

    def _flush(self) -> None:
        try:
            self.sink.flush()
        except Exception as err:  # noqa: BLE001 - delivery failed after the producer's retries
            failed = getattr(self.sink, "failed", None)
            lost = (failed - self._published_failed) if isinstance(failed, int) else 1
            self._published_failed = failed if isinstance(failed, int) else 0
            self.metrics.dropped.labels("delivery-failed").inc(max(1, lost))
            log.error("records lost in delivery (%s): relisting every stream to republish "
                      "the current state", err)
            for stream in self.streams:
                stream.resync.set()
                stream.abort()

    def run(self) -> None:
        """Start the streams and publish until ``stop()``; flushes before returning."""
        firsts = [s for s in self.streams if s.spec.resource != "events"]
        events = [s for s in self.streams if s.spec.resource == "events"]
        for stream in firsts:
            stream.start()
        # Events need their pods' gangs: start them once the pods are listed (bounded wait,
        # while this loop keeps draining the queue)
        events_due: float | None = time.monotonic() + 30.0
        interval = self.config.tick_interval
        tick = getattr(self.sink, "tick_all_partitions", None) if interval else None
        next_tick = next_flush = time.monotonic()
        while not self.stopping.is_set():
            now = time.monotonic()
            if events_due is not None and (now >= events_due
                                           or all(s.synced.is_set() for s in firsts)):
                for stream in events:
                    stream.start()
                events_due = None
            wait = min(next_flush, next_tick if tick else next_flush) - now
            try:
                item = self.queue.get(timeout=max(0.0, min(wait, 0.2)))
            except queue.Empty:
                item = None
            at = self.clock()
            if item is not None:
                self._perform(self.router.route(item.resource, item.type, item.obj,
                                                item.prev, at))
            self._perform(self.router.expire(at))
            self.metrics.queue_depth.set(self.queue.qsize())
            now = time.monotonic()
            if tick is not None and now >= next_tick:
                try:
                    tick(at)
                except Exception as err:  # noqa: BLE001 - a missed tick is harmless
                    log.warning("tick failed: %s", err)
                next_tick = now + (interval or 1.0)
            if now >= next_flush:
                self._flush()
                next_flush = now + self.config.flush_interval
        # drain what the streams already handed over, then flush
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            at = self.clock()
            self._perform(self.router.route(item.resource, item.type, item.obj, item.prev, at))
        held = sum(len(events) for events in self.router.held.values())
        if held:  # Events still waiting for their pod: lost with this process, counted
            self.metrics.dropped.labels("shutdown").inc(held)
        self._flush()

    def start(self) -> "Watcher":
        """Run in a background thread (tests)."""
        self._thread = threading.Thread(target=self.run, name="watcher", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every stream (cutting open watch connections) and the publishing loop."""
        self.stopping.set()
        for stream in self.streams:
            stream.abort()
        for stream in self.streams:
            if stream.is_alive():
                stream.join(timeout)
        if self._thread is not None:
            self._thread.join(timeout)
