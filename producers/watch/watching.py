"""The watch producer: Kubernetes list+watch of gang Pods, PodGroups and scheduler Events into
``gang-events`` (``gangstate watch``).

Where it sits: the live source at the head of the pipeline. It lists and watches core/v1 Pods
(server-side field selector ``spec.schedulerName=<name>``: ``koord-scheduler`` and
``default-scheduler`` by default), Koordinator's ``scheduling.sigs.k8s.io/v1alpha1`` PodGroups
(when the CRD is installed), Kubernetes' own ``scheduling.k8s.io`` PodGroups (v1beta1),
CompositePodGroups (v1alpha3) and Workloads (v1beta1) (when the cluster serves them: v1.37 with
the ``GenericWorkload`` gate), and core/v1 Events (``involvedObject.kind=Pod,reason=<r>`` for
``FailedScheduling``, ``Scheduled`` and ``Preempted``), and publishes:
- ``gangstate.kube/v1`` records keyed by gang id (a PodGroup's own: ``ns/name`` for
  Koordinator's, ``ns/name@kube-scheduler`` for a native one; an Event's key is the gang of its
  involved pod, known from the pods seen);
- ``gangstate.cycle/v1`` records derived from scheduler Events (``producers.watch.scheduler_events``),
  with ``cycle`` null (Events carry no cycle number) and ``source`` naming the Event: its uid and
  count identify the attempt; and from each change of a gang pod's failed ``PodScheduled``
  condition (``producers.watch.conditions``: the same attempts, often before their Events,
  ``source.kind`` ``condition``);
- ``gangstate.capacity/v1`` keyed by gang id, when a Node or bound-pod change alters the room
  of the short resource of a gang whose last failed attempt carried one (``GangRouter.rooms``):
  a gang held out of the scheduling queue has no attempts to tell it;
- ``gangstate.tick/v1`` to every partition about once a second: the live source's clock;
- ``gangstate.dead-letter/v1`` for malformed Events only (no involved pod name, no uid).

Outside the ``default`` cluster (``GANGSTATE_CLUSTER``/``--cluster``, docs/fleet.md) each of
them also carries ``"cluster": <its cluster>`` and a key within it (``eu-1:team-a/llm``); in
``default`` they are as they always were.

An Event whose involved pod is not known is held ``hold_events`` seconds (in a live watch an
Event can arrive before its pod's ADDED); if the pod does not show up, the pod is gone (a
re-list returns every stored Event, also those of pods deleted long ago) and the Event is
dropped and counted (``pod-gone``), never dead-lettered: it is not bad input.

Layout, one module per job: the object shapes (``producers.watch.shapes``: ``published``,
``slim``, ``kube_record``), the configuration and stream plan (``producers.watch.plan``:
``WatchConfig``, ``plan_streams``, ``relist_diff``, ``retry_delay``), the routing
(``producers.watch.routing``: ``GangRouter``, deterministic), all pure and table-tested, and this
module, the thin shell (``Watcher``: one thread per list+watch stream feeding a bounded queue,
one publishing loop), which also offers the pure parts' names its callers import. The shell
follows client-go's Reflector
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

Must not: decide anything about gangs beyond membership
(``streams.core.native.gang_of_pod_object``),
drop a record without counting it, or read the wall clock except through the injected clock.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Protocol

import tenacity
from prometheus_client import CollectorRegistry, Counter, Gauge

from producers.clusters import for_cluster
from producers.watch.plan import (DEFAULT_EVENT_REASONS, DEFAULT_SCHEDULERS,
                                  WATCH_TIMEOUT_MARGIN, StreamSpec, WatchConfig, plan_streams,
                                  relist_diff, retry_delay)
from producers.watch.routing import Action, DeadLetter, Drop, GangRouter, Publish
from producers.watch.shapes import (GROUP_RESOURCES, KINDS, event_count, kube_record, published,
                                    slim)
from streams.settings import Settings
from streams.kafka.waiting import Backoff  # sends to Kafka; the API server: retry_delay
from streams.wire.contracts import ROSTER_SCHEMA, dead_letter
from streams.core.timefmt import format_time

__all__ = [  # the shell's own names, then the pure parts' names its callers import from here
    "ApiError", "Metrics", "RecordSink", "Watcher", "wall_clock_micros",
    "DEFAULT_EVENT_REASONS", "DEFAULT_SCHEDULERS", "WATCH_TIMEOUT_MARGIN", "StreamSpec",
    "WatchConfig", "plan_streams", "relist_diff", "retry_delay", "Action", "DeadLetter", "Drop",
    "GangRouter", "Publish", "event_count", "kube_record", "published", "slim", "Backoff",
]

log = logging.getLogger(__name__)


def wall_clock_micros() -> int:
    """The default clock: microseconds since the Unix epoch, wall time."""
    return time.time_ns() // 1000


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
        self.api_missing = Gauge("gangstate_watch_api_missing",
                                 "1 while an API the watch follows is not served (404), by "
                                 "resource and API group/version", ["resource", "api"],
                                 registry=r)

    def value(self, name: str, **labels: str) -> float:
        """Current value of a sample (``gangstate_watch_relists_total``...), 0 when absent."""
        return self.registry.get_sample_value(name, labels) or 0.0


class _Gone(Exception):
    """410 Gone: the resourceVersion is too old; relist."""


class _Silent(Exception):
    """An open watch received nothing for ``read_timeout`` seconds (the client's read timed
    out): resume it, as after a clean end."""


ROSTER = "roster"
"""The ``resource`` of the marker the publishing loop puts behind the first lists: when it
comes out of the queue, the roster is sent (``Watcher._send_roster``)."""


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
        if spec.resource in GROUP_RESOURCES:
            custom = client.CustomObjectsApi(api)
            group, _, version = spec.api_version.partition("/")
            if spec.namespace:
                resp = custom.list_namespaced_custom_object(group, version, spec.namespace,
                                                            spec.resource, **kwargs)
            else:
                resp = custom.list_cluster_custom_object(group, version, spec.resource, **kwargs)
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
        kind, api_version = KINDS[self.spec.resource][0], self.spec.api_version
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
        ``refused_for`` seconds in a row, then the watcher gives up with one line.

        The one retry loop of the shell not run by tenacity: it is client-go's Reflector, a
        state machine (list, watch, resume, relist) whose retry count restarts in the middle
        of an attempt (a list or watch served), which tenacity's attempt count cannot."""
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
                        log.info("%s: %s is served now", self.spec.name, self._what())
                        self._crd_reported = False
                        self._missing(0)
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
                if err.code == 404 and resource in GROUP_RESOURCES:
                    # the API is not served: Koordinator's CRD not installed, or a cluster
                    # without Kubernetes' own gang scheduling (gate GenericWorkload, or
                    # CompositePodGroup, off; the group version not enabled): one line, a
                    # gauge, and a look again every crd_recheck seconds
                    if not self._crd_reported:
                        # a WARNING for Koordinator's CRD (koord-scheduler's gangs cannot be
                        # told without it); INFO for the native APIs, off by default in v1.37
                        # (beta GenericWorkload): most clusters lack them, and rightly
                        log.log(logging.WARNING if self._koordinator_crd() else logging.INFO,
                                "%s: %s is not served (404 %s); %s of that API are not "
                                "watched (looking again every %.0f s)", self.spec.name, self._what(),
                                err.reason or "NotFound", KINDS[resource][0] + "s",
                                w.config.crd_recheck)
                        self._crd_reported = True
                        self._missing(1)
                    self.synced.set()
                    w.stopping.wait(w.config.crd_recheck)
                    continue
                limit = None
                if err.code in (401, 403):
                    # an API server just (re)started refuses until its authenticator and
                    # authorizer are ready (measured: 403 "cannot watch resource events" right
                    # after a restart); refused for refused_for seconds in a row, it is
                    # credentials or RBAC, not a passing fault
                    now = w.monotonic()
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

    def _koordinator_crd(self) -> bool:
        """True for the stream of Koordinator's PodGroups (its CRD)."""
        return not self.spec.api and self.spec.resource == "podgroups"

    def _what(self) -> str:
        """The API of this stream for the one line of a missing one: ``the PodGroup CRD
        (scheduling.sigs.k8s.io/v1alpha1)`` for Koordinator's, ``the API
        scheduling.k8s.io/v1beta1 podgroups (Kubernetes' own gang scheduling: ...)`` for a
        native one."""
        if self._koordinator_crd():
            return f"the PodGroup CRD ({self.spec.api_version})"
        return (f"the API {self.spec.api_version} {self.spec.resource} (Kubernetes' own gang "
                f"scheduling: feature gate GenericWorkload"
                f"{', CompositePodGroup' if self.spec.resource == 'compositepodgroups' else ''}"
                f" and --runtime-config={self.spec.api_version} on kube-apiserver)")

    def _missing(self, value: int) -> None:
        """Set the gauges of a missing API: ``api_missing`` for every one, and
        ``podgroup_crd_missing`` (kept as it was) for Koordinator's CRD."""
        metrics = self.w.metrics
        metrics.api_missing.labels(self.spec.resource, self.spec.api_version).set(value)
        if self._koordinator_crd():
            metrics.crd_missing.set(value)

    def _refused(self, err: ApiError) -> str:
        """The one line for 401 or 403 answers to this stream's list (or watch) for
        ``refused_for`` seconds in a row."""
        host = getattr(getattr(self.w.api_client, "configuration", None), "host", "?")
        group = self.spec.api_version.rpartition("/")[0]
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
    ``config.tick_interval`` is set. ``settings.cluster`` (``GANGSTATE_CLUSTER``) is the
    cluster watched: outside ``default`` every record sent (records, dead letters, ticks)
    carries it and is keyed within it (``producers.clusters.for_cluster`` wraps ``sink``:
    the one place that stamps it; the router keeps the bare gang ids its cluster uses). ``clock``: event time in microseconds for ``observed_at``
    (of records, ticks and dead letters; default wall clock); ``monotonic``: seconds, for the
    loop's own schedule (flushes, ticks, the Events' start, how long 401/403 answers last). ``run()`` blocks until ``stop()`` (or SIGTERM/SIGINT via
    ``run_watch``); ``start()``/``stop()`` run it in a background thread for tests.
    """

    def __init__(self, api_client: Any, sink: RecordSink, settings: Settings,
                 config: WatchConfig = WatchConfig(), *,
                 clock: Callable[[], int] = wall_clock_micros,
                 metrics: Metrics | None = None,
                 rand: Callable[[], float] = random.random,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.api_client, self.settings, self.config = api_client, settings, config
        self.sink = for_cluster(sink, settings.cluster)
        self.clock, self.rand, self.monotonic = clock, rand, monotonic
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
        deadline = None if timeout is None else self.monotonic() + timeout
        for stream in self.streams:
            left = None if deadline is None else max(0.0, deadline - self.monotonic())
            if not stream.synced.wait(left):
                return False
        return True

    # -- publishing loop -----------------------------------------------------------------------
    def _send(self, topic: str, key: str | None, record: dict[str, Any],
              partition: int | None = None) -> bool:
        """Send one record, retried until it is handed over (tenacity: ``Backoff``
        between attempts, ``backoff_base`` doubling to ``backoff_cap``, full jitter) or the
        watcher stops (then counted as dropped, ``shutdown``: returns ``False``)."""

        def before_sleep(state: tenacity.RetryCallState) -> None:
            self.metrics.publish_retries.inc()
            log.warning("publishing to %s failed (%s); retrying in %.2f s", topic,
                        state.outcome.exception() if state.outcome else None,
                        state.upcoming_sleep)

        try:
            tenacity.Retrying(  # kafka-python raises KafkaTimeoutError and others: any is retried
                retry=tenacity.retry_if_exception_type(Exception),
                stop=lambda _state: self.stopping.is_set(),
                wait=Backoff(self.config.backoff_base, self.config.backoff_cap, self.rand),
                sleep=self._pause, before_sleep=before_sleep,
            )(self.sink.send_json, topic, key, record, partition)
        except tenacity.RetryError:
            self.metrics.dropped.labels("shutdown").inc()
            return False
        return True

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, or less when the watcher stops meanwhile."""
        self.stopping.wait(seconds)

    def _perform(self, actions: Iterable[Action], at: int) -> None:
        """Carry out the router's actions; ``at`` (the clock's microseconds when they were
        routed) is a dead letter's ``observed_at``."""
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
                    format_time(at), topics.gang_events, None, None, None,
                    json.dumps(action.record, separators=(",", ":")).encode(), action.error)
                if self._send(topics.dead_letters, None, letter):
                    self.metrics.dead_letters.labels(action.reason).inc()

    def _take(self, item: _Item, roster: Callable[[int, Any], int] | None, at: int) -> None:
        """Route one queued watch event at event time ``at``, or, for the roster marker,
        send the roster (``roster``: the sink's ``roster_all_partitions``)."""
        if item.resource != ROSTER:
            self._perform(self.router.route(item.resource, item.type, item.obj, item.prev, at),
                          at)
        elif roster is not None:
            self._send_roster(roster, at)

    def _send_roster(self, send: Callable[[int, Any], int], at: int) -> None:
        """Send the router's roster (``GangRouter.roster``: every gang pod known now) to
        every partition (``send``: the sink's ``roster_all_partitions``) at event time
        ``at``; a failure is logged, not retried (the table keeps what it had)."""
        gangs = self.router.roster()
        try:
            count = send(at, gangs)
        except Exception as err:  # noqa: BLE001 - the fold goes on without it
            log.warning("roster of %d gangs not sent: %s", len(gangs), err)
            return
        self.metrics.published.labels(ROSTER_SCHEMA, "pods").inc(count)
        log.info("roster of %d gangs sent to %d partitions", len(gangs), count)

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
        events_due: float | None = self.monotonic() + 30.0
        interval = self.config.tick_interval
        tick = getattr(self.sink, "tick_all_partitions", None) if interval else None
        # once every first list is in the queue, a marker behind them: when it comes out, the
        # router knows every gang pod that exists, and the roster tells the fold (a pod deleted
        # while no watch ran gets no DELETED otherwise)
        roster = getattr(self.sink, "roster_all_partitions", None)
        roster_marked: Callable[[int, Any], int] | None = None
        next_tick = next_flush = self.monotonic()
        while not self.stopping.is_set():
            now = self.monotonic()
            if events_due is not None and (now >= events_due
                                           or all(s.synced.is_set() for s in firsts)):
                for stream in events:
                    stream.start()
                events_due = None
            if roster is not None and all(s.synced.is_set() for s in firsts):
                try:
                    self.queue.put_nowait(_Item(ROSTER, "", {}, None))
                    roster_marked, roster = roster, None
                except queue.Full:  # the loop drains it; the marker goes in next time
                    pass
            wait = min(next_flush, next_tick if tick else next_flush) - now
            try:
                item = self.queue.get(timeout=max(0.0, min(wait, 0.2)))
            except queue.Empty:
                item = None
            at = self.clock()
            if item is not None:
                self._take(item, roster_marked, at)
            self._perform(self.router.expire(at), at)
            self.metrics.queue_depth.set(self.queue.qsize())
            now = self.monotonic()
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
            self._take(item, roster_marked, self.clock())
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
