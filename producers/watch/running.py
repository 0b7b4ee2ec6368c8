"""The watch producer as a process: ``gangstate watch``'s runner.

Where it sits: the shell around ``producers.watch.watching``: it builds the ``WatchConfig`` from
the command's flags, loads the kubeconfig (``streams.kube.kubeconfig``; a bad one is exit 2
before anything waits), waits for Kafka (``streams.kafka.waiting``: retried with backoff, one
line per 10 s), serves ``/metrics`` and ``/readyz``, and stops on SIGTERM or SIGINT at any
moment with exit status 0. The command line itself is ``streams.cli.components``.

Must not: decide anything about gangs or publish anything itself (the ``Watcher`` does).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Any

from producers.watch.plan import DEFAULT_SCHEDULERS, WatchConfig
from producers.watch.watching import Metrics, Watcher
from streams.settings import Settings

log = logging.getLogger(__name__)


def _api_client(args: argparse.Namespace) -> Any:
    """The ``kubernetes.client.ApiClient`` of ``--kubeconfig``/``--context`` or
    ``--in-cluster``; TLS verified as ``streams.kube.kubeconfig`` describes. Raises
    ``KubeconfigError`` (one line) when the configuration cannot be loaded."""
    from kubernetes import client

    from streams.kube.kubeconfig import load_configuration

    return client.ApiClient(load_configuration(args.kubeconfig, args.context,
                                               args.in_cluster))


def run_watch(args: argparse.Namespace) -> int:
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
    from streams.kafka.logs import limited_handler
    from streams.kafka.publishing import Publisher, ensure_topics
    from streams.kafka.waiting import (Failure, Readiness, kafka_source, serve_http,
                                       wait_for_kafka)
    from streams.kube.kubeconfig import KubeconfigError

    # each kind of line at most once per 10 s (a broker that is down)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s",
                        handlers=[limited_handler()])
    try:
        config = WatchConfig(
            namespaces=tuple(args.namespace), podgroups=not args.no_podgroups,
            scheduler_names=tuple(args.scheduler_name) or DEFAULT_SCHEDULERS,
            tick_interval=args.tick_interval or None, watch_timeout=args.watch_timeout,
            read_timeout=args.read_timeout, queue_size=args.queue_size)
    except ValueError as err:
        print(f"gangstate watch: {err}", file=sys.stderr, flush=True)
        return 2
    settings = Settings.from_env().with_flags(args.bootstrap, getattr(args, "prefix", None),
                                              getattr(args, "kafka_security", None))
    if not settings.bootstrap:
        print("gangstate watch: set KAFKA_BOOTSTRAP_SERVERS or --bootstrap", file=sys.stderr,
              flush=True)
        return 2
    try:
        api_client = _api_client(args)
    except KubeconfigError as err:
        print(f"gangstate watch: {err}", file=sys.stderr, flush=True)
        return 2
    metrics = Metrics()
    source = kafka_source(args.bootstrap)
    watcher: Watcher | None = None
    host = api_client.configuration.host

    def lists() -> str | None:
        if watcher is None:
            return "connecting"
        waiting = [s.spec.name for s in watcher.streams if not s.synced.is_set()]
        return (f"waiting for the API server at {host}: not listed yet: {', '.join(waiting)}"
                if waiting else None)

    readiness = Readiness(f"waiting for Kafka at {settings.bootstrap} ({source})", lists)
    if args.metrics_port:
        serve_http(args.metrics_port, getattr(args, "metrics_bind", "127.0.0.1"),
                   metrics.registry, readiness)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()
        if watcher is not None:
            watcher.stopping.set()
            for stream in watcher.streams:
                stream.abort()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def connect() -> Publisher:
        ensure_topics(settings)
        return Publisher(settings, client_id="gangstate-watch")

    publisher = wait_for_kafka(settings, "gangstate watch", source=source, timeout=None,
                               stop=stop, readiness=readiness, then=connect)
    if publisher is None:
        return 0
    watcher = Watcher(api_client, publisher, settings, config, metrics=metrics)
    log.info("connected to Kafka at %s; watching %d streams into %s", settings.bootstrap,
             len(watcher.streams), settings.topics.gang_events)
    if stop.is_set():
        watcher.stopping.set()
    try:
        watcher.run()
    finally:
        watcher.stop()
        publisher.close()
    if watcher.failure is not None:
        raise Failure(watcher.failure)
    return 0
