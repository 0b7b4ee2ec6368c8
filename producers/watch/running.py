"""The watch producer as a process: ``gangstate watch``'s runner.

Where it sits: the shell around ``producers.watch.watching``: it builds the ``WatchConfig`` from
the command's flags, reaches the API server (``streams.kube.kubeconfig``) and Kafka (retried
with backoff while the broker is not reachable), serves the metrics, and stops on SIGTERM or
SIGINT. The command line itself is ``streams.cli.components``.

Must not: decide anything about gangs or publish anything itself (the ``Watcher`` does).
"""

from __future__ import annotations

import argparse
import logging
import random
import signal
import sys
import threading
from typing import Any

from producers.watch.watching import (DEFAULT_SCHEDULERS, Metrics, WatchConfig, Watcher,
                                      backoff_delay)
from streams.kafka.settings import Settings

log = logging.getLogger(__name__)


def _api_client(args: argparse.Namespace) -> Any:
    """The ``kubernetes.client.ApiClient`` of ``--kubeconfig``/``--context`` or
    ``--in-cluster``; TLS verified as ``streams.kube.kubeconfig`` describes."""
    from kubernetes import client

    from streams.kube.kubeconfig import load_configuration

    return client.ApiClient(load_configuration(args.kubeconfig, args.context,
                                               args.in_cluster))


def run_watch(args: argparse.Namespace) -> int:
    """``gangstate watch``: connect, publish until SIGTERM/SIGINT, flush, exit 0. Returns 2 when
    the timeouts are invalid (``WatchConfig``: the watch timeout must end a quiet watch before
    the read timeout) or Kafka is not configured. Kafka being unreachable at start is retried
    with backoff."""
    from streams.kafka.publishing import Publisher, ensure_topics

    from streams.kafka.logs import limited_handler

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
    metrics = Metrics()
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port, addr=getattr(args, "metrics_bind", "127.0.0.1"),
                          registry=metrics.registry)
    stop = threading.Event()
    watcher: Watcher | None = None

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()
        if watcher is not None:
            watcher.stopping.set()
            for stream in watcher.streams:
                stream.abort()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    attempt = 0
    publisher = None
    while publisher is None and not stop.is_set():
        try:
            ensure_topics(settings)
            publisher = Publisher(settings, client_id="gangstate-watch")
        except Exception as err:  # noqa: BLE001 - broker not reachable yet
            delay = backoff_delay(attempt, config.backoff_base, config.backoff_cap,
                                  random.random())
            log.warning("Kafka not reachable (%s); retrying in %.1f s", err, delay)
            stop.wait(delay)
            attempt += 1
    if publisher is None:
        return 0
    watcher = Watcher(_api_client(args), publisher, settings, config, metrics=metrics)
    if stop.is_set():
        watcher.stopping.set()
    try:
        watcher.run()
    finally:
        watcher.stop()
        publisher.close()
    return 0
