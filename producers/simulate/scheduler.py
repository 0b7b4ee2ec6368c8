"""A Koordinator-like gang scheduler in virtual time: the simulator's engine.

Where it sits: between ``scenario`` (the planned workload) and ``run`` (which connects the
engine to the fold and measures). ``ClusterSim`` plays pods, queues, nodes and gangs as a
discrete-event simulation and hands every record a real cluster would produce to ``sink(key,
record)``; which pod is a gang group's representative after a command is asked of an injected
``RepresentativeAuthority`` at the two apply points (AfterPostFilter, PreEnqueue).

The model (Koordinator v1.7+, after PR #2509 removed the representative switch; the
documented assumptions are in ``docs/simulator.md``):

- **Queues** (kube-scheduler ``pkg/scheduler/internal/queue/scheduling_queue.go``): activeQ
  ordered by priority then enqueue time; backoffQ (1 s doubling to 10 s per attempt);
  unschedulablePods, left on a matching cluster event or after 300 s (checked every 30 s).
  A pod that failed Filter for resources is moved by a pod finishing (resources freed); a pod
  rejected by Coscheduling (rejected at Permit, Permit timeout) only by a new member of its gang
  or the 300 s flush.
- **PreEnqueue** (``coscheduling.go`` ``PreEnqueue``): a pod passes when its gang has at least
  min-available member pods and it is its gang group's representative, or the group has none
  (then it becomes the representative). Otherwise it is gated: no Event, one ``Gated`` cycle
  record. Gated pods are re-checked on gang events (a member created or deleted, the
  representative cleared).
- **Scheduling context** (``core/gang_context.go``): popping the representative hands out every
  pending member of its group (NextPod), one attempt (cycle) each: Filter by fit (best fit on
  GPUs, then CPU, then node name); a fitting member is reserved and waits at Permit until
  min-available members wait or are bound (``core/core.go`` ``Permit``), at most the gang's
  waiting time (per gang, from its first waiting member).
- **Failure**: Strict rejects every waiting member of the group (``rejectGangGroupById``) and
  ends the context; NonStrict keeps them waiting and goes on. The representative is *not*
  switched: it stays the one parked at Permit (NonStrict) or in unschedulablePods (Strict,
  issue #2773), so the failed member is gated even after resources free up, until the waiting
  time ends or the flush moves the representative.
- **Binding and completion**: an allowed member binds after ``bind_seconds``; a representative
  that binds or is deleted is cleared (``PodBound``/``PodDeleted``); a job runs ``runtime``
  seconds once min-available members are bound, then its pods succeed (resources freed, a
  cluster event) and are deleted ``delete_after`` seconds later.

Must not: draw randomness or read the wall clock (every random quantity is in the planned
workload); decide commands (the fold does); talk to Kafka (``run`` does).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from streams.core.timefmt import format_time
from streams.wire.contracts import CYCLE_SCHEMA, KUBE_SCHEMA

from .scenario import PlannedJob, Scenario

SCHEDULER_NAME = "koord-scheduler"
ANN = "gang.scheduling.koordinator.sh/"

Sink = Callable[[str, dict[str, Any]], None]
"""Receives ``(key, record)``: a ``gangstate.kube/v1`` or ``gangstate.cycle/v1`` dict and its
``gang-events`` key (the gang id)."""


class RepresentativeAuthority(Protocol):
    """Where buffered commands are applied: the shim's core in-process, ``Shim`` live."""

    def point(self, gang_group: str, kind: str, current: str | None,
              candidates: list[str], at: float) -> str | None:
        """Apply the group's buffered commands at an apply point (``kind`` is
        ``AfterPostFilter`` or ``PreEnqueue``); return the representative to use (``ns/name``).
        ``at`` is virtual seconds."""
        ...


class NoCommands:
    """The authority of Koordinator alone: nothing is ever switched."""

    def point(self, gang_group: str, kind: str, current: str | None,
              candidates: list[str], at: float) -> str | None:
        """Return ``current`` unchanged."""
        return current


@dataclass
class Node:
    """A node and its free GPUs / CPU cores (reservations of waiting pods included)."""

    name: str
    gpu: int
    cpu: int
    gpu_free: int
    cpu_free: int


@dataclass(eq=False)
class Pod:
    """One member pod. ``where``: ``absent`` (not created yet), ``gated``, ``active``,
    ``backoff``, ``unschedulable``, ``waiting`` (at Permit), ``binding``, ``bound``,
    ``succeeded``, ``deleted``. ``plugin``: why it is unschedulable (``fit``/``gang``)."""

    gang: "Gang"
    index: int
    name: str
    uid: str
    created_at: float | None = None
    rv: int = 0
    where: str = "absent"
    plugin: str = ""
    since: float = 0.0
    attempts: int = 0
    node: str | None = None
    reserved: str | None = None
    cycle: int | None = None
    conditions: list[dict[str, Any]] = field(default_factory=list)
    phase: str = "Pending"
    gated_since: float | None = None
    events: list[float] = field(default_factory=list)
    silent_wait: bool = False

    @property
    def key(self) -> str:
        """``ns/name``."""
        return f"{self.gang.ns}/{self.name}"

    @property
    def pending(self) -> bool:
        """Created, unbound and not finished: the scheduler still has to place it."""
        return self.where in ("gated", "active", "backoff", "unschedulable")


@dataclass(eq=False)
class Gang:
    """One gang, a gang group of one (``groups`` is not simulated)."""

    job: PlannedJob
    pods: list[Pod] = field(default_factory=list)
    rep: Pod | None = None
    waiting: list[Pod] = field(default_factory=list)
    permit_token: int = 0
    cycles: int = 0
    last_created: float | None = None
    bound_at: float | None = None
    bound: int = 0
    done: bool = False

    @property
    def ns(self) -> str:
        """The gang's namespace."""
        return self.job.kind.namespace

    @property
    def id(self) -> str:
        """The gang id (== gang group id)."""
        return self.job.gang

    @property
    def created(self) -> int:
        """Member pods that exist (created, not deleted)."""
        return sum(1 for p in self.pods if p.where not in ("absent", "deleted"))


class ClusterSim:
    """The discrete-event engine. ``run(until)`` processes events up to virtual second
    ``until``; ``sink`` receives records, ``authority`` decides representatives after commands.

    Virtual time ``now`` is seconds since the scenario's ``start``. Records carry
    ``observed_at`` = start + now. Deterministic: events at the same time run in the order they
    were scheduled.
    """

    def __init__(self, scenario: Scenario, jobs: list[PlannedJob], sink: Sink,
                 authority: RepresentativeAuthority | None = None) -> None:
        self.scenario = scenario
        self.cfg = scenario.scheduler
        self.sink = sink
        self.authority: RepresentativeAuthority = authority or NoCommands()
        self.now = 0.0
        self.cycle = 0
        self.rv = 1000
        self._events: list[tuple[float, int, str, Any]] = []
        self._seq = 0
        self._active: list[tuple[int, float, int, Pod]] = []
        self.busy_until = 0.0
        self.nodes = [Node(f"{p.name}-{i}", p.gpu, p.cpu, p.gpu, p.cpu)
                      for p in scenario.node_pools for i in range(p.count)]
        self.gangs: list[Gang] = []
        self.switches = 0
        for job in jobs:
            gang = Gang(job)
            gang.pods = [Pod(gang, pp.index, pp.name, pp.uid) for pp in job.pods]
            self.gangs.append(gang)
            self._at(job.arrival, "arrive", gang)
        self._by_key = {p.key: p for g in self.gangs for p in g.pods}
        self._at(self.cfg.flush_interval, "flush", None)
        self._pop_scheduled = False

    # -- event plumbing -------------------------------------------------------------------------

    def _at(self, t: float, kind: str, arg: Any) -> None:
        self._seq += 1
        heapq.heappush(self._events, (round(t, 6), self._seq, kind, arg))

    def next_time(self) -> float | None:
        """Virtual time of the next event, or ``None`` when none is left."""
        return self._events[0][0] if self._events else None

    def run(self, until: float, before_event: Callable[[float], None] | None = None) -> None:
        """Process every event due at or before ``until`` (virtual seconds). ``before_event(t)``
        is called before each one (the live runner paces itself there)."""
        while self._events and self._events[0][0] <= until:
            t, _, kind, arg = heapq.heappop(self._events)
            if before_event is not None:
                before_event(t)
            self.now = max(self.now, t)
            getattr(self, f"_on_{kind}")(arg)
        self.now = max(self.now, until)

    # -- records --------------------------------------------------------------------------------

    def stamp(self, t: float | None = None) -> str:
        """RFC 3339 ``observed_at`` of virtual second ``t`` (default now)."""
        t = self.now if t is None else t
        return format_time(self.scenario.start_micros + int(round(t * 1_000_000)))

    def pod_object(self, pod: Pod) -> dict[str, Any]:
        """The Pod as the API server would return it, with Koordinator gang annotations."""
        kind = pod.gang.job.kind
        meta: dict[str, Any] = {
            "name": pod.name, "namespace": kind.namespace, "uid": pod.uid,
            "resourceVersion": str(pod.rv),
            "creationTimestamp": self.stamp(pod.created_at)[:19] + "Z",
            "labels": {"app.kubernetes.io/name": pod.gang.job.name,
                       "training.kubeflow.org/replica-index": str(pod.index)},
            "annotations": {
                ANN + "name": pod.gang.job.name,
                ANN + "min-available": str(kind.min_member),
                ANN + "total-number": str(kind.gang_size),
                ANN + "mode": kind.mode,
                ANN + "waiting-time": f"{int(kind.waiting_time)}s",
            },
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                 "name": pod.gang.job.name, "uid": pod.gang.job.uid,
                                 "controller": True, "blockOwnerDeletion": True}],
        }
        if pod.where == "deleted":
            meta["deletionTimestamp"] = self.stamp()[:19] + "Z"
        spec: dict[str, Any] = {
            "schedulerName": SCHEDULER_NAME, "priority": kind.priority, "restartPolicy": "Never",
            "containers": [{"name": "trainer", "image": "registry.example.com/train:2.4",
                            "resources": {
                                "requests": {"cpu": str(kind.cpu_per_pod), "memory": "64Gi",
                                             "nvidia.com/gpu": str(kind.gpus_per_pod)},
                                "limits": {"nvidia.com/gpu": str(kind.gpus_per_pod)}}}],
        }
        if pod.node:
            spec["nodeName"] = pod.node
        status: dict[str, Any] = {"phase": pod.phase, "qosClass": "Burstable"}
        if pod.conditions:
            status["conditions"] = list(pod.conditions)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
                "status": status}

    def _kube(self, pod: Pod, type_: str) -> None:
        self.rv += 1
        pod.rv = self.rv
        self.sink(pod.gang.id, {"schema": KUBE_SCHEMA, "observed_at": self.stamp(),
                                "resource": "pods", "type": type_,
                                "object": self.pod_object(pod)})

    def _cycle(self, pod: Pod, stage: str, status: str, reason: str = "", message: str = "",
               node: str | None = None, cycle: int | None = None, t: float | None = None) -> None:
        gang = pod.gang
        self.sink(gang.id, {
            "schema": CYCLE_SCHEMA, "observed_at": self.stamp(t),
            "scheduler": SCHEDULER_NAME, "cycle": self.cycle if cycle is None else cycle,
            "pod": {"namespace": gang.ns, "name": pod.name, "uid": pod.uid},
            "gang": gang.id, "gang_group": gang.id, "stage": stage, "status": status,
            "reason": reason, "message": message,
            "representative": gang.rep.key if gang.rep else None, "node": node})

    def note_event(self, pod_key: str, t: float) -> None:
        """Record that a Kubernetes Event naming ``pod_key`` (``ns/name``) was written at
        virtual second ``t`` (a gangstate diagnostic turned into an Event); unknown pods are
        ignored. The scheduler's own FailedScheduling Events are noted by the engine."""
        pod = self._by_key.get(pod_key)
        if pod is not None:
            pod.events.append(t)

    def call_at(self, t: float, fn: Callable[[], None]) -> None:
        """Run ``fn()`` at virtual second ``t`` (after the events already due then)."""
        self._at(t, "call", fn)

    def _on_call(self, fn: Callable[[], None]) -> None:
        fn()

    # -- lifecycle events -----------------------------------------------------------------------

    def _on_arrive(self, gang: Gang) -> None:
        for pp, pod in zip(gang.job.pods, gang.pods):
            self._at(self.now + pp.delay, "create", pod)

    def _on_create(self, pod: Pod) -> None:
        gang = pod.gang
        pod.created_at = self.now
        pod.where = "created"
        gang.last_created = self.now
        self._kube(pod, "ADDED")
        self._pre_enqueue(pod)
        # Coscheduling registers Pod/Add: members rejected by the gang plugin and gated members
        # are re-checked when a sibling appears.
        for other in gang.pods:
            if other is pod:
                continue
            if other.where == "unschedulable" and other.plugin == "gang":
                self._to_backoff(other)
            elif other.where == "gated":
                self._pre_enqueue(other)

    def _on_flush(self, _: Any) -> None:
        for gang in self.gangs:
            for pod in gang.pods:
                if pod.where == "unschedulable" and self.now - pod.since >= \
                        self.cfg.unschedulable_max:
                    self._to_backoff(pod)
        self._at(self.now + self.cfg.flush_interval, "flush", None)

    def _on_backoff_done(self, arg: tuple[Pod, int]) -> None:
        pod, attempts = arg
        if pod.where == "backoff" and pod.attempts == attempts:
            self._pre_enqueue(pod)

    def _to_backoff(self, pod: Pod) -> None:
        pod.where = "backoff"
        delay = min(self.cfg.backoff_initial * 2 ** min(max(pod.attempts - 1, 0), 30),
                    self.cfg.backoff_max)
        self._at(max(self.now, pod.since + delay), "backoff_done", (pod, pod.attempts))

    def _cluster_event_resources_freed(self) -> None:
        """A pod finished, or an assumed (waiting) pod was forgotten after a rejection or a
        Permit timeout (kube-scheduler ``handleBindingCycleError`` treats that as
        ``AssignedPodDelete``): NodeResourcesFit's hint moves pods that failed Filter for
        resources out of unschedulablePods. Pods rejected by the gang plugin are not moved."""
        for gang in self.gangs:
            if gang.done:
                continue
            for pod in gang.pods:
                if pod.where == "unschedulable" and pod.plugin == "fit":
                    self._to_backoff(pod)

    # -- PreEnqueue and the queue ---------------------------------------------------------------

    def _pre_enqueue(self, pod: Pod) -> None:
        gang = pod.gang
        if gang.created < gang.job.kind.min_member:
            return self._gate(pod, "GangBasicCheckUnsatisfied")
        self._apply_point(gang, "PreEnqueue")
        if gang.rep is None:
            gang.rep = pod
        if gang.rep is not pod:
            return self._gate(pod, "NotRepresentative")
        if pod.gated_since is not None:
            self._end_gated(pod)
        pod.where = "active"
        heapq.heappush(self._active, (-gang.job.kind.priority, self.now, self._next(), pod))
        self._kick()

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _gate(self, pod: Pod, reason: str) -> None:
        if pod.where != "gated":
            pod.where = "gated"
            pod.gated_since = self.now
            self._cycle(pod, "PreEnqueue", "Gated", reason,
                        "pod is held at PreEnqueue: " + (
                            "not enough gang members" if reason == "GangBasicCheckUnsatisfied"
                            else "another pod is the gang group's representative"))

    def _end_gated(self, pod: Pod) -> None:
        start = pod.gated_since
        pod.gated_since = None
        if start is None or self.now - start <= self.cfg.grace_seconds:
            return
        if not any(e <= self.now for e in pod.events):
            pod.silent_wait = True

    def _apply_point(self, gang: Gang, kind: str) -> None:
        candidates = [p.key for p in gang.pods if p.pending]
        current = gang.rep.key if gang.rep else None
        chosen = self.authority.point(gang.id, kind, current, candidates, self.now)
        if chosen != current:
            self.switches += 1
            gang.rep = next((p for p in gang.pods if p.key == chosen), None)

    def _kick(self) -> None:
        if not self._pop_scheduled:
            self._pop_scheduled = True
            self._at(max(self.now, self.busy_until), "pop", None)

    def _on_pop(self, _: Any) -> None:
        self._pop_scheduled = False
        while self._active:
            _, _, _, pod = heapq.heappop(self._active)
            if pod.where == "active":
                self._schedule_group(pod)
                break
        if self._active:
            self._kick()

    # -- the scheduling context of one gang group -----------------------------------------------

    def _fit(self, pod: Pod) -> Node | None:
        kind = pod.gang.job.kind
        fits = [n for n in self.nodes
                if n.gpu_free >= kind.gpus_per_pod and n.cpu_free >= kind.cpu_per_pod]
        if not fits:
            return None
        return min(fits, key=lambda n: (n.gpu_free - kind.gpus_per_pod,
                                        n.cpu_free - kind.cpu_per_pod, n.name))

    def _fit_message(self, pod: Pod) -> tuple[str, str]:
        kind = pod.gang.job.kind
        gpu = sum(1 for n in self.nodes if n.gpu_free < kind.gpus_per_pod)
        cpu = sum(1 for n in self.nodes if n.cpu_free < kind.cpu_per_pod)
        parts = []
        if cpu:
            parts.append(f"{cpu} Insufficient cpu")
        if gpu:
            parts.append(f"{gpu} Insufficient nvidia.com/gpu")
        reason = "Insufficient nvidia.com/gpu" if gpu else "Insufficient cpu"
        return reason, f"0/{len(self.nodes)} nodes are available: {', '.join(parts)}."

    def _schedule_group(self, rep: Pod) -> None:
        gang = rep.gang
        kind = gang.job.kind
        members = [rep] + [p for p in gang.pods if p is not rep and p.pending]
        t = self.now
        for pod in members:
            if pod.gated_since is not None:
                self._end_gated(pod)
            self.cycle += 1
            gang.cycles += 1
            pod.attempts += 1
            pod.cycle = self.cycle
            t += self.cfg.attempt_seconds
            self.now = t
            node = self._fit(pod)
            if node is not None:
                node.gpu_free -= kind.gpus_per_pod
                node.cpu_free -= kind.cpu_per_pod
                pod.reserved = node.name
                pod.where = "waiting"
                gang.waiting.append(pod)
                if len(gang.waiting) + gang.bound >= kind.min_member:
                    self._cycle(pod, "Permit", "Success", "", "gang group is satisfied",
                                node.name)
                    self._allow(gang)
                else:
                    self._cycle(pod, "Permit", "Wait", "", "waiting for gang members",
                                node.name)
                    if len(gang.waiting) == 1:
                        gang.permit_token += 1
                        self._at(t + kind.waiting_time, "permit_timeout",
                                 (gang, gang.permit_token))
                continue
            reason, message = self._fit_message(pod)
            self._cycle(pod, "Filter", "Unschedulable", reason, message)
            self._fail(pod, "fit", "Unschedulable", message)
            # AfterPostFilter: runs after every PostFilter plugin (PR #2490); preemption is not
            # modelled, so PostFilter only does the gang's rejection below.
            self._apply_point(gang, "AfterPostFilter")
            if kind.mode == "Strict":
                self._reject_waiting(gang, pod, message)
                break
        self.busy_until = t

    def _fail(self, pod: Pod, plugin: str, reason: str, message: str) -> None:
        pod.where = "unschedulable"
        pod.plugin = plugin
        pod.since = self.now
        pod.events.append(self.now)  # the scheduler's FailedScheduling Event
        pod.conditions = [{"type": "PodScheduled", "status": "False", "reason": reason,
                           "message": message, "lastTransitionTime": self.stamp()[:19] + "Z"}]
        self._kube(pod, "MODIFIED")

    def _release(self, pod: Pod) -> None:
        kind = pod.gang.job.kind
        node = next(n for n in self.nodes if n.name == pod.reserved)
        node.gpu_free += kind.gpus_per_pod
        node.cpu_free += kind.cpu_per_pod
        pod.reserved = None

    def _reject_waiting(self, gang: Gang, failed: Pod, message: str) -> None:
        text = (f"GangGroup \"{gang.id}\" gets rejected due to member Pod \"{failed.name}\" is "
                f"unschedulable with reason \"{message}\", alreadyWaitForBound: 0")
        waiting, gang.waiting = gang.waiting, []
        gang.permit_token += 1
        for pod in waiting:
            self._release(pod)
            self._cycle(pod, "PostFilter", "Rejected", "GangGroupRejected", text,
                        cycle=failed.cycle)
            self._fail(pod, "gang", "Unschedulable", text)
        if waiting:
            self._cluster_event_resources_freed()

    def _on_permit_timeout(self, arg: tuple[Gang, int]) -> None:
        gang, token = arg
        if token != gang.permit_token or not gang.waiting:
            return
        waiting, gang.waiting = gang.waiting, []
        gang.permit_token += 1
        text = (f"rejected due to timeout after waiting {int(gang.job.kind.waiting_time)}s at "
                f"plugin Coscheduling")
        for pod in waiting:
            self._release(pod)
            self._cycle(pod, "Permit", "Timeout", "PermitTimeout", text, cycle=pod.cycle)
            self._fail(pod, "gang", "Unschedulable", text)
        self._cluster_event_resources_freed()
        # the waiting ended: the representative is dropped and gated siblings are re-checked
        self._clear_rep(gang)

    def _clear_rep(self, gang: Gang) -> None:
        gang.rep = None
        for pod in gang.pods:
            if pod.where == "gated":
                self._pre_enqueue(pod)

    def _allow(self, gang: Gang) -> None:
        waiting, gang.waiting = gang.waiting, []
        gang.permit_token += 1
        for i, pod in enumerate(waiting):
            pod.where = "binding"
            self._at(self.now + self.cfg.bind_seconds * (1 + i * 0.1), "bound", pod)

    def _on_bound(self, pod: Pod) -> None:
        gang = pod.gang
        if pod.where != "binding":
            return
        pod.node, pod.reserved = pod.reserved, None
        pod.where = "bound"
        gang.bound += 1
        pod.conditions = [{"type": "PodScheduled", "status": "True",
                           "lastTransitionTime": self.stamp()[:19] + "Z"}]
        self._kube(pod, "MODIFIED")
        self._cycle(pod, "Bind", "Bound", "", f"bound to {pod.node}", pod.node, cycle=pod.cycle)
        self._at(self.now + self.cfg.start_seconds, "running", pod)
        if gang.rep is pod:
            self._clear_rep(gang)
        if gang.bound >= gang.job.kind.min_member and gang.bound_at is None:
            gang.bound_at = self.now
            self._at(self.now + gang.job.runtime, "complete", gang)

    def _on_running(self, pod: Pod) -> None:
        if pod.where == "bound":
            pod.phase = "Running"
            self._kube(pod, "MODIFIED")

    def _on_complete(self, gang: Gang) -> None:
        gang.done = True
        kind = gang.job.kind
        for pod in gang.pods:
            if pod.where in ("bound", "binding"):
                node = next(n for n in self.nodes if n.name == (pod.node or pod.reserved))
                node.gpu_free += kind.gpus_per_pod
                node.cpu_free += kind.cpu_per_pod
                pod.where, pod.phase = "succeeded", "Succeeded"
                pod.reserved = None
                self._kube(pod, "MODIFIED")
            elif pod.where == "waiting":
                self._release(pod)
                pod.where = "succeeded"
            elif pod.where != "absent":
                pod.where = "succeeded"  # a pod beyond min-available never needed: finished
        gang.waiting = []
        self._at(self.now + self.cfg.delete_after, "delete", gang)
        self._cluster_event_resources_freed()

    def _on_delete(self, gang: Gang) -> None:
        for pod in gang.pods:
            if pod.where == "succeeded":
                pod.where = "deleted"
                self._kube(pod, "DELETED")

    # -- results --------------------------------------------------------------------------------

    def finish(self) -> None:
        """Close the open gated stretches at the end of the run (for the silent-wait count)."""
        for gang in self.gangs:
            for pod in gang.pods:
                if pod.gated_since is not None:
                    self._end_gated(pod)
