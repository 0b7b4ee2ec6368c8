"""The watch producer as a process: ``gangstate watch``'s runner.

Where it sits: the shell around ``producers.watch.watching``: it builds the ``WatchConfig`` from
the command's options (``WatchOptions``), loads the kubeconfig (``streams.kube.kubeconfig``; a
bad one is exit 2 before anything waits), waits for Kafka (``streams.kafka.waiting``: retried
with backoff, one line per 10 s), serves ``/metrics`` and ``/readyz``, and stops on SIGTERM or
SIGINT at any moment with exit status 0, all through the runner of every component
(``streams.runner``). The command line itself is ``streams.cli.components``.

Must not: decide anything about gangs or publish anything itself (the ``Watcher`` does).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from producers.watch.plan import DEFAULT_SCHEDULERS, WatchConfig
from producers.watch.watching import Metrics, Watcher
from streams.core.cluster import DEFAULT_CLUSTER
from streams.runner import Component, KafkaOptions, KubeOptions, ServeOptions
from streams.settings import Settings

log = logging.getLogger(__name__)


class WatchOptions(KubeOptions, ServeOptions, KafkaOptions):
    """``gangstate watch``'s options (``streams.cli.components`` builds them from its flags):
    where the API server is, the HTTP port, the Kafka flags, and ``namespaces`` (empty: all),
    ``scheduler_names`` (empty: ``DEFAULT_SCHEDULERS``), ``podgroups`` (watch Koordinator's
    PodGroups), ``native`` (watch Kubernetes' own PodGroups, CompositePodGroups and Workloads),
    ``tick_interval`` (seconds; 0: no ticks), ``watch_timeout`` (seconds, the server-side
    ``timeoutSeconds``), ``read_timeout`` (seconds), ``queue_size`` (watch events) and
    ``cluster`` (the cluster watched, ``--cluster``; ``None``: ``GANGSTATE_CLUSTER``, else
    ``default``; docs/fleet.md)."""

    namespaces: tuple[str, ...] = ()
    scheduler_names: tuple[str, ...] = ()
    podgroups: bool = True
    native: bool = True
    tick_interval: float = 1.0
    watch_timeout: int = 60
    read_timeout: float = 90.0
    queue_size: int = 1000
    cluster: str | None = None

    def settings(self) -> Settings:
        """The Kafka settings (``KafkaOptions.settings``) with ``--cluster`` applied."""
        settings = super().settings()
        return settings if self.cluster is None else replace(settings, cluster=self.cluster)


def cluster_words(cluster: str) -> str:
    """What the start line says of the cluster watched: ``" as cluster eu-1 (records
    stamped, keys eu-1:<gang id>)"``; nothing in ``default`` (the line as before fleets)."""
    if cluster == DEFAULT_CLUSTER:
        return ""
    return f" as cluster {cluster} (records stamped, keys {cluster}:<gang id>)"


def _api_client(options: KubeOptions) -> Any:
    """The ``kubernetes.client.ApiClient`` of ``--kubeconfig``/``--context`` or
    ``--in-cluster``; TLS verified as ``streams.kube.kubeconfig`` describes. Raises
    ``KubeconfigError`` (one line) when the configuration cannot be loaded."""
    from kubernetes import client

    from streams.kube.kubeconfig import load_configuration

    return client.ApiClient(load_configuration(options.kubeconfig, options.context,
                                               options.in_cluster))


def run_watch(options: WatchOptions) -> int:
    """``gangstate watch``: connect, publish until SIGTERM/SIGINT, flush, exit 0 (also when
    stopped while it waits). Returns 2 when the timeouts are invalid (``WatchConfig``: the watch
    timeout must end a quiet watch before the read timeout), Kafka is not configured or the
    kubeconfig cannot be loaded (checked first, before anything waits); raises ``Failure`` (1)
    when the API server refuses a stream's list or watch (401, 403) for ``refused_for`` seconds
    in a row (10 s; refusals right after an API server restart are retried quickly). Kafka
    being unreachable is retried with backoff (``streams.kafka.waiting``), the API server on
    ``plan.retry_delay``'s quicker schedule (each stream's own loop);
    meanwhile ``/readyz`` on ``--http-port`` answers 503 with the reason, and 200 once Kafka
    answers and every stream has listed."""
    from streams.kafka.publishing import Publisher, ensure_topics
    from streams.kafka.waiting import Failure
    from streams.kube.kubeconfig import KubeconfigError

    component = Component("gangstate watch")
    component.start_logging()
    try:
        config = WatchConfig(
            namespaces=options.namespaces, podgroups=options.podgroups, native=options.native,
            scheduler_names=options.scheduler_names or DEFAULT_SCHEDULERS,
            tick_interval=options.tick_interval or None, watch_timeout=options.watch_timeout,
            read_timeout=options.read_timeout, queue_size=options.queue_size)
    except ValueError as err:
        return component.usage_error(str(err))
    settings = options.settings()
    if not settings.bootstrap:
        return component.usage_error("set KAFKA_BOOTSTRAP_SERVERS or --bootstrap")
    try:
        api_client = _api_client(options)
    except KubeconfigError as err:
        return component.usage_error(str(err))
    metrics = Metrics()
    watcher: Watcher | None = None
    host = api_client.configuration.host

    def lists() -> str | None:
        if watcher is None:
            return "connecting"
        waiting = [s.spec.name for s in watcher.streams if not s.synced.is_set()]
        return (f"waiting for the API server at {host}: not listed yet: {', '.join(waiting)}"
                if waiting else None)

    component.readiness.reason = (f"waiting for Kafka at {settings.bootstrap} "
                                  f"({options.source()})")
    component.readiness.check = lists
    component.serve(options.http_port or None, options.http_bind, metrics.registry)

    def abort_streams() -> None:
        if watcher is not None:
            watcher.stopping.set()
            for stream in watcher.streams:
                stream.abort()

    component.handle_signals(abort_streams)

    def connect() -> Publisher:
        ensure_topics(settings)
        return Publisher(settings, client_id="gangstate-watch")

    publisher = component.wait_for_kafka(settings, options.source(), then=connect)
    if publisher is None:
        return 0
    watcher = Watcher(api_client, publisher, settings, config, metrics=metrics)
    log.info("connected to Kafka at %s; watching %d streams into %s%s", settings.bootstrap,
             len(watcher.streams), settings.topics.gang_events, cluster_words(settings.cluster))
    if component.stop.is_set():
        watcher.stopping.set()
    try:
        watcher.run()
    finally:
        watcher.stop()
        publisher.close()
    if watcher.failure is not None:
        raise Failure(watcher.failure)
    return 0
