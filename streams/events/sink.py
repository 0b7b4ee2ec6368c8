"""``gangstate sink``: diagnostics -> Kubernetes Events that ``kubectl describe pod`` shows.

Where it sits: the end of the pipeline, beside the scheduler shim. It consumes the
``diagnostics`` topic (kafka-python, consumer group ``group_id``: ``<app id>-event-sink``,
``<app id>-event-sink-<cluster>`` outside the ``default`` cluster; offsets committed after the
Events of a batch are written) and writes one Event per (involved object, reason, ``field``)
through the Kubernetes API, as client-go's event recorder does (``tools/record``):

    diagnostics --KafkaConsumer--> EventSink.write(diagnostic)
        streams.events.recorder.occurrences   one occurrence per Pod / PodGroup
        Recorder.decide                   cache + GET on a miss -> Create | Patch | Skip | Drop
        EventSink._apply                  POST / strategic-merge PATCH (create on 404)
        EventSink._call                   the one function that talks to the API

``_call`` sorts failures as client-go's ``recordEvent`` does: transport errors, 5xx and 429 are
retried with capped exponential backoff (``Retry-After`` honoured) up to ``maxTriesPerEvent``
(12) tries; any other 4xx gives that Event up, with a logged and counted reason. A 403 is a
configuration error (the ServiceAccount lacks a verb; ``deploy/kubernetes/rbac.yaml``), never
retried: it is logged once at ERROR per verb, resource, API group and namespace, and counted in
``gangstate_sink_api_forbidden_total``. Nothing here raises to the caller for an API failure.
Counters: ``gangstate_sink_events_total{action, reason}`` (action ``created``/``patched``/
``skipped``/``dropped``).

One sink per cluster (docs/fleet.md): a sink serves the cluster of its API server
(``GANGSTATE_CLUSTER``, ``--cluster``; ``default`` without fleet) and writes only the
diagnostics of that cluster (a diagnostic without ``cluster`` is of ``default``); every other
one is skipped, counted as ``skipped{reason="other-cluster"}`` (one per diagnostic), never
written to the wrong API server. Each cluster's sink has a consumer group of its own: sinks of
two clusters in one group would split the partitions, and each would miss its own cluster's
diagnostics on the other's partitions.

API calls, all namespaced and all through ``_call`` (the RBAC the sink needs, per ``--api``):
``GET`` (get) an Event by name on a cache miss, ``POST`` (create), strategic-merge ``PATCH``
(patch), on ``events`` in API group ``""`` (core/v1) or ``events.k8s.io``.

Must not: decide anything itself (the decisions come from ``streams.events.recorder``), crash on a
bad record or an API failure, or read the wall clock except through the injected ``clock`` and
``sleep``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Protocol

import tenacity
from prometheus_client import CollectorRegistry, Counter
from pydantic import ValidationError

from streams.core.cluster import DEFAULT_CLUSTER
from streams.runner import Component, KafkaOptions, KubeOptions, ServeOptions
from streams.settings import Settings, own_app_id
from streams.wire.contracts import Diagnostic
from streams.events.bodies import render, written_from_event
from streams.events.recorder import (Api, Create, Decision, EventKey, Occurrence, Patch, Recorder,
                                     SpamFilter, Written, occurrences, outcome)

log = logging.getLogger(__name__)

PATHS: dict[str, str] = {"core/v1": "/api/v1/namespaces/{ns}/events",
                         "events.k8s.io/v1": "/apis/events.k8s.io/v1/namespaces/{ns}/events"}
"""Collection path of Events per API (namespaced)."""
MERGE_PATCH = "application/strategic-merge-patch+json"


@dataclass(frozen=True)
class Response:
    """One HTTP answer: ``status`` code, ``headers`` (lower-case names) and the JSON ``body``
    (``{}`` when empty or not JSON)."""

    status: int
    headers: Mapping[str, str]
    body: dict[str, Any]


class Transport(Protocol):
    """Sends one request to the API server. Raises ``OSError`` (or any exception) for a
    transport failure; HTTP errors are answers, not exceptions."""

    def __call__(self, method: str, path: str, body: Any = None,
                 content_type: str = "application/json") -> Response: ...


class KubeTransport:
    """``Transport`` over a ``kubernetes.client.ApiClient`` (auth, TLS and host from the
    kubeconfig or the in-cluster ServiceAccount). Bodies go as JSON exactly as given: the
    typed ``CoreV1Api`` methods would re-encode timestamps through their models."""

    def __init__(self, api_client: Any, timeout: tuple[float, float] = (5.0, 30.0)) -> None:
        self.api_client = api_client
        self.timeout = timeout

    @classmethod
    def from_configuration(cls, configuration: Any) -> "KubeTransport":
        """A transport for a ``kubernetes.client.Configuration`` with urllib3's own retries
        off: urllib3 would otherwise retry a GET answered 429/503 with ``Retry-After`` by
        itself, and ``EventSink._call`` must be the one place that retries."""
        import urllib3
        from kubernetes import client

        configuration.retries = urllib3.Retry(total=0, redirect=0, raise_on_status=False,
                                              respect_retry_after_header=False)
        return cls(client.ApiClient(configuration))

    def __call__(self, method: str, path: str, body: Any = None,
                 content_type: str = "application/json") -> Response:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        params = self.api_client.param_serialize(method=method, resource_path=path,
                                                 header_params=headers, body=body,
                                                 auth_settings=["BearerToken"])
        resp = self.api_client.call_api(*params, _request_timeout=self.timeout)
        data = resp.read() or b""
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            parsed = {}
        return Response(resp.status, {k.lower(): v for k, v in resp.headers.items()},
                        parsed if isinstance(parsed, dict) else {})


class DryRunTransport:
    """``Transport`` that contacts nothing: ``GET`` answers 404, ``POST``/``PATCH`` print one
    JSON line ``{"verb", "path", "body"}`` through ``write`` and answer success."""

    def __init__(self, write: Callable[[str], Any] = print) -> None:
        self.write = write

    def __call__(self, method: str, path: str, body: Any = None,
                 content_type: str = "application/json") -> Response:
        if method == "GET":
            return Response(404, {}, {"reason": "NotFound"})
        verb = {"POST": "create", "PATCH": "patch"}.get(method, method.lower())
        try:
            self.write(json.dumps({"verb": verb, "path": path, "body": body},
                                  ensure_ascii=False, sort_keys=True))
        except BrokenPipeError:
            # the reader of the output went away (``| head``): end quietly, as a Unix filter
            # does, instead of retrying a write that no API server was ever part of
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise SystemExit(0) from None
        return Response(201 if method == "POST" else 200, {}, dict(body or {}))


@dataclass(frozen=True)
class RetryPolicy:
    """client-go ``recordToSink``: at most ``tries`` attempts (``maxTriesPerEvent`` = 12);
    delays ``base * 2**n`` seconds capped at ``cap``, or the server's ``Retry-After`` (seconds,
    capped at ``cap``)."""

    tries: int = 12
    base: float = 0.5
    cap: float = 30.0

    def delay(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 0)."""
        if retry_after:
            try:
                return min(self.cap, max(0.0, float(retry_after)))
            except ValueError:
                pass
        return min(self.cap, self.base * (2 ** attempt))


class _Retryable(Exception):
    """A failed request that is tried again: ``status`` (the metric's label: the HTTP code or
    ``transport``), the server's ``Retry-After`` if any, and ``last``, the failure in words."""

    def __init__(self, status: str, retry_after: str | None, last: str) -> None:
        super().__init__(last)
        self.status, self.retry_after, self.last = status, retry_after, last


class GiveUp(Exception):
    """An Event that will not be written; ``reason`` goes to the counter."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class Forbidden(GiveUp):
    """A request the API server refused with 403: the sink's ServiceAccount lacks ``verb`` on
    ``resource`` of API ``group`` (``""`` = core) in ``namespace``. A configuration error, not a
    transient one: never retried. ``reason`` is ``api-403``."""

    def __init__(self, verb: str, group: str, resource: str, namespace: str,
                 detail: str = "") -> None:
        super().__init__("api-403", detail)
        self.verb, self.group, self.resource, self.namespace = verb, group, resource, namespace


def request_attributes(method: str, path: str) -> tuple[str, str, str, str]:
    """``(verb, API group, resource, namespace)`` of one of the sink's requests, named as RBAC
    names them (kube-apiserver ``RequestInfoFactory``, ``k8s.io/apiserver@v0.35.2``
    ``pkg/endpoints/request/requestinfo.go:129-260``): ``GET`` of a named object is ``get``,
    ``POST`` ``create``, ``PATCH`` ``patch``; ``/api/v1`` is group ``""``. Pure."""
    parts = [p for p in path.split("/") if p]
    group, rest = ("", parts[2:]) if parts[:1] == ["api"] else (
        parts[1] if len(parts) > 1 else "", parts[3:])
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] if rest else ""
    named = len(rest) > 1
    verb = {"GET": "get" if named else "list", "POST": "create", "PATCH": "patch",
            "PUT": "update", "DELETE": "delete"}.get(method, method.lower())
    return verb, group, resource, namespace


@dataclass(frozen=True)
class GivenUp:
    """An Event the sink gave up on: ``reason`` is ``api-<status>`` (a 4xx other than 404,
    409 and 429), ``retries-exhausted`` or ``conflict``."""

    key: EventKey
    reason: str


class Metrics:
    """Prometheus counters of one sink, in their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.events = Counter("gangstate_sink_events", "Event decisions applied by the sink",
                              ["action", "reason"], registry=self.registry)
        self.retries = Counter("gangstate_sink_api_retries",
                               "API requests retried (5xx, 429, transport errors)",
                               ["status"], registry=self.registry)
        self.forbidden = Counter("gangstate_sink_api_forbidden",
                                 "API requests refused with 403 Forbidden (missing RBAC), by "
                                 "verb, API group, resource and namespace",
                                 ["verb", "group", "resource", "namespace"],
                                 registry=self.registry)

    def value(self, action: str, reason: str) -> float:
        """Current value of ``gangstate_sink_events_total{action, reason}`` (0 when unset)."""
        got = self.registry.get_sample_value("gangstate_sink_events_total",
                                             {"action": action, "reason": reason})
        return got or 0.0


class EventSink:
    """Applies the recorder's decisions to one API (``api``: ``core/v1`` or
    ``events.k8s.io/v1``) through ``transport``.

    ``instance`` is the ``reportingInstance`` (at most 128 characters). ``cluster`` is the
    cluster whose API server ``transport`` reaches: only its diagnostics are written.
    ``clock`` (seconds) feeds the spam filter; ``sleep`` waits between retries.
    ``write(diagnostic)`` returns the decisions taken, in ``involved`` order, after applying
    them (an Event given up on comes back as ``GivenUp`` and leaves the cache as it was)."""

    def __init__(self, transport: Transport, *, api: Api = "core/v1",
                 instance: str = "gangstate", recorder: Recorder | None = None,
                 metrics: Metrics | None = None, retry: RetryPolicy = RetryPolicy(),
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Any] = time.sleep,
                 cluster: str = DEFAULT_CLUSTER) -> None:
        self.transport = transport
        self.api = api
        self.cluster = cluster
        self.instance = instance
        self.recorder = recorder or Recorder(SpamFilter(clock))
        self.metrics = metrics or Metrics()
        self.retry = retry
        self.sleep = sleep
        self._forbidden_logged: set[tuple[str, str, str, str]] = set()

    # -- the one function that talks to the API ------------------------------------------------
    def _call(self, method: str, path: str, body: Any = None,
              content_type: str = "application/json") -> Response:
        """Send one request; return a 2xx, 404 or 409 answer. Transport errors, 5xx and 429
        are retried per ``self.retry`` (tenacity: at most ``tries`` attempts, ``delay`` between
        them, through ``self.sleep``); raises ``Forbidden`` for a 403, ``GiveUp("api-<code>")``
        for any other 4xx and ``GiveUp("retries-exhausted")`` after the last try."""

        def attempt() -> Response:
            try:
                resp = self.transport(method, path, body, content_type)
            except Exception as err:  # noqa: BLE001 - any transport failure is retried
                raise _Retryable("transport", None, f"{type(err).__name__}: {err}") from None
            if resp.status < 300 or resp.status in (404, 409):
                return resp
            message = resp.body.get("message", "")
            if resp.status == 403:
                raise Forbidden(*request_attributes(method, path), f"{method} {path}: {message}")
            if resp.status != 429 and resp.status < 500:
                raise GiveUp(f"api-{resp.status}", f"{method} {path}: {message}")
            raise _Retryable(str(resp.status), resp.headers.get("retry-after"),
                             f"{resp.status} {message}")

        def failed(state: tenacity.RetryCallState) -> _Retryable:
            err = state.outcome.exception() if state.outcome else None
            assert isinstance(err, _Retryable)
            return err

        def before_sleep(state: tenacity.RetryCallState) -> None:
            err = failed(state)
            self.metrics.retries.labels(status=err.status).inc()
            log.info("%s %s failed (%s); retrying in %.2f s", method, path, err.last,
                     state.upcoming_sleep)

        try:
            return tenacity.Retrying(
                retry=tenacity.retry_if_exception_type(_Retryable),
                stop=tenacity.stop_after_attempt(self.retry.tries),
                wait=lambda state: self.retry.delay(state.attempt_number - 1,
                                                    failed(state).retry_after),
                sleep=self.sleep, before_sleep=before_sleep)(attempt)
        except tenacity.RetryError as err:
            last = err.last_attempt.exception()
            raise GiveUp("retries-exhausted",
                         f"{method} {path}: {getattr(last, 'last', '')}") from None

    # -- reading and writing Events ------------------------------------------------------------
    def _path(self, namespace: str, name: str | None = None) -> str:
        base = PATHS[self.api].format(ns=namespace)
        return f"{base}/{name}" if name else base

    def _lookup(self, key: EventKey) -> Written | None:
        """GET the Event of ``key`` by its deterministic name (``None`` when absent)."""
        resp = self._call("GET", self._path(key.involved.namespace, key.name))
        if resp.status == 404:
            return None
        return written_from_event(resp.body)

    def _apply(self, decision: Create | Patch) -> Create | Patch:
        """Write one decision and record the new state in the recorder. A patch answered 404
        creates the Event instead (client-go ``recordEvent``: "the event may have been
        removed"). Raises ``GiveUp("conflict")`` when a create is answered 409, and the
        ``GiveUp`` of ``_call``."""
        state = decision.state
        if isinstance(decision, Patch):
            resp = self._call("PATCH", self._path(state.namespace, state.name),
                              render(self.api, decision, self.instance), MERGE_PATCH)
            if resp.status != 404:
                self.recorder.observe(decision.key, state)
                return decision
            decision = Create(decision.key, state)
        resp = self._call("POST", self._path(state.namespace),
                          render(self.api, decision, self.instance))
        if resp.status == 409:
            raise GiveUp("conflict", f"Event {state.name} already exists")
        self.recorder.observe(decision.key, state)
        return decision

    def _record(self, occ: Occurrence) -> Decision:
        """Decide and apply one occurrence. A create that meets an existing Event (409: another
        writer, or a cache that said absent) forgets the cached state, reads the Event and
        decides once more."""
        applied: list[EventKey] = []  # the key of the decision last applied

        def attempt() -> Decision:
            decision = self.recorder.decide(occ, self._lookup)
            if isinstance(decision, (Create, Patch)):
                applied.append(decision.key)
                return self._apply(decision)
            return decision

        return tenacity.Retrying(
            retry=tenacity.retry_if_exception(
                lambda err: isinstance(err, GiveUp) and err.reason == "conflict"),
            stop=tenacity.stop_after_attempt(2), reraise=True, sleep=lambda _seconds: None,
            before_sleep=lambda _state: self.recorder.forget(applied[-1]))(attempt)

    def write(self, diagnostic: Mapping[str, Any]) -> list[Decision | GivenUp]:
        """Write the Events of one ``gangstate.diagnostic/v1`` dict, one per involved object;
        returns what happened to each, in ``involved`` order. Never raises for API failures: a
        given-up Event is logged and counted as ``dropped{reason}``. A diagnostic of another
        cluster than the sink's (its ``cluster``; absent: ``default``) writes nothing: ``[]``,
        counted once as ``skipped{reason="other-cluster"}``. Raises ``KeyError``/``ValueError``
        for a malformed diagnostic."""
        if diagnostic.get("cluster", DEFAULT_CLUSTER) != self.cluster:
            self.metrics.events.labels(action="skipped", reason="other-cluster").inc()
            log.debug("skipped a diagnostic of cluster %s (this sink writes %s's): %s",
                      diagnostic.get("cluster", DEFAULT_CLUSTER), self.cluster,
                      diagnostic.get("id", ""))
            return []
        results: list[Decision | GivenUp] = []
        for occ in occurrences(diagnostic):
            try:
                decision = self._record(occ)
            except Forbidden as err:
                self._forbidden(err, occ)
                self.metrics.events.labels(action="dropped", reason=err.reason).inc()
                results.append(GivenUp(occ.key, err.reason))
                continue
            except GiveUp as err:
                log.warning("giving up on Event %s (%s %s/%s %s): %s", occ.key.name,
                            occ.key.involved.kind, occ.key.involved.namespace,
                            occ.key.involved.name, occ.key.reason, err)
                self.metrics.events.labels(action="dropped", reason=err.reason).inc()
                results.append(GivenUp(occ.key, err.reason))
                continue
            action, reason = outcome(decision)
            self.metrics.events.labels(action=action, reason=reason).inc()
            results.append(decision)
        return results

    def _forbidden(self, err: Forbidden, occ: Occurrence) -> None:
        """Count a 403 and log it: at ERROR the first time for its verb, resource, API group
        and namespace (a missing RBAC rule fails every Event there the same way), at DEBUG
        after that."""
        what = (err.verb, err.group, err.resource, err.namespace)
        self.metrics.forbidden.labels(*what).inc()
        resource = f"{err.resource}.{err.group}" if err.group else err.resource
        if what in self._forbidden_logged:
            log.debug("forbidden again: %s %s in namespace %s (Event %s dropped)", err.verb,
                      resource, err.namespace, occ.key.name)
            return
        self._forbidden_logged.add(what)
        log.error("the API server forbids the sink to %s %s (API group %r) in namespace %r: no "
                  "Event needing it can be written there until the sink's ServiceAccount is "
                  "granted %r on %r in API group %r (deploy/kubernetes/rbac.yaml). Logged once; "
                  "each refusal is counted in gangstate_sink_api_forbidden_total and the Event "
                  "is dropped. Server said: %s", err.verb, resource, err.group, err.namespace,
                  err.verb, err.resource, err.group, err)

    def write_raw(self, value: bytes | str) -> list[Decision | GivenUp]:
        """Decode and validate one Kafka value, then ``write`` it (one of another cluster is
        skipped there). An undecodable or invalid value is logged and counted as
        ``dropped{reason="invalid-diagnostic"}``."""
        try:
            diagnostic = Diagnostic.model_validate_json(value)
            return self.write(diagnostic.model_dump(by_alias=True))
        except (ValidationError, ValueError, KeyError) as err:
            log.warning("skipping a value that is not a gangstate.diagnostic/v1: %s", err)
            self.metrics.events.labels(action="dropped", reason="invalid-diagnostic").inc()
            return []


# ---------------------------------------------------------------------------------------------
# Kafka
# ---------------------------------------------------------------------------------------------

def group_id(settings: Settings) -> str:
    """The sink's consumer group: ``<app id>-event-sink`` in the ``default`` cluster (as
    before fleets: a sink upgraded in place resumes at its committed offsets), and
    ``<app id>-event-sink-<cluster>`` outside it. One group per cluster: the sinks of two
    clusters in one group would split the partitions of ``diagnostics``, and each would skip
    the other's records and never see its own on the other's partitions (docs/fleet.md)."""
    if settings.cluster == DEFAULT_CLUSTER:
        return f"{settings.app_id}-event-sink"
    return f"{settings.app_id}-event-sink-{settings.cluster}"


def consume(settings: Settings, sink: EventSink, stop: threading.Event,
            poll_seconds: float = 0.5, max_records: int = 200) -> int:
    """Consume ``diagnostics`` in the group ``group_id(settings)`` until ``stop`` is set, write
    each record's Events, and commit the batch's offsets after its Events are written (at least
    once; the recorder makes repeats harmless). Returns the number of records processed.
    Raises ``kafka.errors.KafkaError`` only when the broker cannot be reached at start."""
    from kafka import KafkaConsumer
    from kafka.errors import CommitFailedError, KafkaError

    assert settings.bootstrap, "KAFKA_BOOTSTRAP_SERVERS is not set"
    consumer = KafkaConsumer(settings.topics.diagnostics, **settings.kafka_python(
        group_id=group_id(settings), client_id="gangstate-sink", enable_auto_commit=False,
        auto_offset_reset="earliest"))
    done = 0
    try:
        while not stop.is_set():
            batch = consumer.poll(timeout_ms=int(poll_seconds * 1000), max_records=max_records)
            if not batch:
                continue
            for records in batch.values():
                for record in records:
                    sink.write_raw(record.value)
                    done += 1
            try:
                consumer.commit()
            except (CommitFailedError, KafkaError) as err:  # rebalanced: records come again
                log.warning("commit failed (%s); the records will be read again", err)
    finally:
        consumer.close()
    return done


def read_input(path: str) -> Iterator[dict[str, Any]]:
    """Diagnostics from a file (``-``: stdin): JSON lines of diagnostics, or one
    ``gangstate fold --output json`` object (its ``diagnostics``). Raises ``OSError`` and
    ``ValueError`` for unreadable input."""
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    stripped = text.strip()
    if stripped.startswith("{") and "\n{" not in stripped:
        doc = json.loads(stripped)
        if isinstance(doc, dict) and "diagnostics" in doc:
            yield from doc["diagnostics"]
            return
    for line in text.splitlines():
        if line.strip():
            yield json.loads(line)


# ---------------------------------------------------------------------------------------------
# The process: runner of `gangstate sink` (its flags: streams.cli.components)
# ---------------------------------------------------------------------------------------------

class SinkOptions(KubeOptions, ServeOptions, KafkaOptions):
    """``gangstate sink``'s options (``streams.cli.components`` builds them from its flags):
    where the API server is, the HTTP port, the Kafka flags, and ``dry_run`` (contact no API
    server), ``api`` (the Event API written), ``instance`` (``reportingInstance``; ``None``: the
    host name), ``input`` (a path of diagnostics, ``-`` stdin; ``None``: Kafka), ``spam_burst``
    (Events per involved object at once), ``spam_refill_seconds`` (seconds per token) and
    ``cluster`` (the cluster written to, ``--cluster``; ``None``: ``GANGSTATE_CLUSTER``, else
    ``default``)."""

    dry_run: bool = False
    api: Api = "core/v1"
    instance: str | None = None
    input: str | None = None
    spam_burst: int = 25
    spam_refill_seconds: float = 300.0
    cluster: str | None = None

    def settings(self) -> Settings:
        """The Kafka settings (``KafkaOptions.settings``) with ``--cluster`` applied."""
        settings = super().settings()
        return settings if self.cluster is None else replace(settings, cluster=self.cluster)


def _transport(options: SinkOptions) -> Transport:
    """``DryRunTransport`` with ``--dry-run``, else a ``KubeTransport`` of the kubeconfig.
    Raises ``KubeconfigError`` (one line) when it cannot be loaded."""
    if options.dry_run:
        return DryRunTransport(lambda line: print(line, flush=True))
    from streams.kube.kubeconfig import load_configuration

    return KubeTransport.from_configuration(
        load_configuration(options.kubeconfig, options.context, options.in_cluster))


def run_sink(options: SinkOptions) -> int:
    """``gangstate sink``: write Events until SIGTERM/SIGINT (or the end of ``--input``).
    Returns 2 when neither Kafka nor ``--input`` is given, the kubeconfig cannot be loaded or
    ``--input`` cannot be read (before anything waits); 1 when every diagnostic of ``--input``
    is invalid (each skipped with one line); 0 otherwise, also when some of ``--input`` were
    skipped and when stopped while it waits for Kafka. Kafka
    being unreachable is retried with backoff (``streams.kafka.waiting``, one line per 10 s);
    meanwhile ``/readyz`` on ``--http-port`` answers 503 with the reason, 200 once Kafka
    answers. Logging, signals, the HTTP server and the wait: ``streams.runner``."""
    from streams.kube.kubeconfig import KubeconfigError

    component = Component("gangstate sink")
    component.start_logging(sys.stderr)
    settings = options.settings()
    if not options.input and not settings.bootstrap:
        return component.usage_error(
            "set KAFKA_BOOTSTRAP_SERVERS (or --bootstrap), or give --input")
    try:
        transport = _transport(options)
    except KubeconfigError as err:
        return component.usage_error(str(err))
    metrics = Metrics()
    component.readiness.reason = (None if options.input else
                                  f"waiting for Kafka at {settings.bootstrap} "
                                  f"({options.source()})")
    component.serve(options.http_port or None, options.http_bind, metrics.registry)
    recorder = Recorder(SpamFilter(time.monotonic, options.spam_burst,
                                   options.spam_refill_seconds))
    sink = EventSink(transport, api=options.api, metrics=metrics, recorder=recorder,
                     instance=options.instance or socket.gethostname(),
                     cluster=settings.cluster)
    if options.input:
        return _write_input(sink, options.input)
    component.handle_signals()
    component.wait_for_kafka(settings, options.source())
    if not component.stop.is_set():
        log.info("connected to Kafka at %s; writing the diagnostics of %s as %s Events "
                 "(consumer group %s)%s", settings.bootstrap, settings.topics.diagnostics,
                 options.api, group_id(settings),
                 "" if settings.cluster == DEFAULT_CLUSTER else
                 f"; cluster {settings.cluster} only, those of other clusters are skipped")
        own = own_app_id(settings)
        if own is not None:  # the group is the app id's: every sink of it shares it
            log.warning("topic prefix %r with the default app id %r: consumer group %s is "
                        "that of every sink of app id %r, whatever its topics; set "
                        "GANGSTATE_APP_ID (e.g. GANGSTATE_APP_ID=%s) to keep this sink's "
                        "group apart", settings.topics.prefix, settings.app_id,
                        group_id(settings), settings.app_id, own)
        consume(settings, sink, component.stop)
    return 0


def _write_input(sink: EventSink, path: str) -> int:
    """Write the Events of the diagnostics in ``path`` (``read_input``); 2 when it cannot be
    read, 1 when every diagnostic is invalid (each skipped with one line on stderr), else 0."""
    try:
        diagnostics = list(read_input(path))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        print(f"gangstate sink: cannot read diagnostics from {path}: {err}", file=sys.stderr)
        return 2
    skipped = 0
    for number, diagnostic in enumerate(diagnostics, start=1):
        try:
            Diagnostic.model_validate(diagnostic)
        except ValidationError as err:
            skipped += 1
            print(f"gangstate sink: {path}: diagnostic {number} skipped: "
                  f"{err.errors(include_url=False)[0]['msg']} "
                  f"({'.'.join(map(str, err.errors()[0]['loc']))})", file=sys.stderr)
            continue
        sink.write(diagnostic)
    return 1 if skipped and skipped == len(diagnostics) else 0
