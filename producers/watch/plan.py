"""The watch's configuration and stream plan: what to list and watch, how patiently, and what a
relist means.

Where it sits: the watch producer's pure part. ``WatchConfig`` is built by ``gangstate watch``'s
runner (``producers.watch.running``) from its flags; ``plan_streams`` turns it into the
list+watch streams the shell (``producers.watch.watching``) runs; ``relist_diff`` and
``retry_delay`` are the streams' pure rules. Table-tested.

Must not: do I/O or read a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from producers.watch.scheduler_events import PREEMPTED_REASON
from producers.watch.shapes import COMPOSITE_API, KINDS, NATIVE_PODGROUP_API, WORKLOAD_API

DEFAULT_SCHEDULERS = ("koord-scheduler", "default-scheduler")
"""The schedulers whose pods are watched by default: Koordinator's (``koord-scheduler``) and
kube-scheduler's default profile (``default-scheduler``, whose ``GangScheduling`` plugin
schedules native gangs), so a cluster running both is explained without configuration. Their
Events are told apart by ``reportingComponent`` (kube-scheduler's is its profile's
``schedulerName``)."""
DEFAULT_EVENT_REASONS = ("FailedScheduling", "Scheduled", PREEMPTED_REASON)
"""The Event reasons watched: the scheduler's attempts, and ``Preempted`` on each victim of a
preemption (kube-scheduler v1.35.2 ``framework/preemption/preemption.go:216``), routed to the
preemptor's gang as ``gangstate.preemption/v1``."""
WATCH_TIMEOUT_MARGIN = 5.0
"""Seconds by which the server-side ``timeoutSeconds`` of a watch must undercut the client's
read timeout, so that the API server ends a quiet watch before the client gives up on it."""


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
    native: bool = True
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
    """One list+watch stream: ``resource`` (``pods``, ``podgroups``, ``compositepodgroups``,
    ``workloads``, ``nodes``, ``boundpods``, ``events``: also the resource of the records it
    publishes), a namespace (``None`` = all), a server-side field selector, and ``api``, the
    ``group/version`` serving it when not the resource's default (``shapes.KINDS``: native
    PodGroups are ``podgroups`` of ``scheduling.k8s.io/v1beta1``, Koordinator's of
    ``scheduling.sigs.k8s.io/v1alpha1``)."""

    resource: str
    namespace: str | None
    field_selector: str
    api: str = ""

    @property
    def api_version(self) -> str:
        """The ``group/version`` (``v1`` for core) the stream lists and watches."""
        return self.api or KINDS[self.resource][1]

    @property
    def name(self) -> str:
        """A label for logs: ``pods[ns=*,spec.schedulerName=koord-scheduler]``,
        ``podgroups.scheduling.k8s.io/v1beta1[ns=*,]`` for a stream of a named API."""
        api = f".{self.api}" if self.api else ""
        return f"{self.resource}{api}[ns={self.namespace or '*'},{self.field_selector}]"


NATIVE_STREAMS = (("podgroups", NATIVE_PODGROUP_API), ("compositepodgroups", COMPOSITE_API),
                  ("workloads", WORKLOAD_API))
"""The native gangs' objects (``scheduling.k8s.io``) watched beside Koordinator's PodGroups:
``(resource, group/version)``."""


def plan_streams(config: WatchConfig) -> list[StreamSpec]:
    """The streams to run, pods first (Events need the pods' gangs), then Koordinator's
    PodGroups, Kubernetes' own PodGroups, CompositePodGroups and Workloads (``NATIVE_STREAMS``),
    Nodes and bound pods, and Events. Field selectors cannot OR
    values (Kubernetes ``fields.Selector``), so there is one pod stream per scheduler name and
    one Event stream per reason, each per namespace. Supported selectors: Pod
    ``spec.schedulerName``, Event ``involvedObject.kind`` and ``reason``
    (``pkg/registry/core/{pod,event}/strategy.go``). Pure."""
    namespaces: Sequence[str | None] = config.namespaces or (None,)
    streams = [StreamSpec("pods", ns, f"spec.schedulerName={name}")
               for ns in namespaces for name in config.scheduler_names]
    if config.podgroups:
        streams += [StreamSpec("podgroups", ns, "") for ns in namespaces]
    if config.native:  # Kubernetes' own gangs (v1.37); each API may be absent
        streams += [StreamSpec(resource, ns, "", api) for ns in namespaces
                    for resource, api in NATIVE_STREAMS]
    if config.capacity:  # the room a gang needs is cluster-wide, whatever the namespaces
        streams += [StreamSpec("nodes", None, ""), StreamSpec("boundpods", None,
                                                               "spec.nodeName!=")]
    streams += [StreamSpec("events", ns, f"involvedObject.kind=Pod,reason={reason}")
                for ns in namespaces for reason in config.event_reasons]
    return streams



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
    not all hit a server that is starting in the same instant); at the cap a watcher's 11
    streams (the defaults, cluster-wide) ask a down server about 7 times a second. Pure."""
    step = min(cap, base * 2.0 ** min(attempt, 30))
    return step / 2 + rand * step / 2

