"""``gangstate`` commands that run a component against a cluster: watch, sink.

Where it sits: the CLI; each command parses its flags into the component's typed options
(pydantic: ``producers.watch.running.WatchOptions``, ``streams.events.sink.SinkOptions``) and
hands them to its runner (``run_watch``, ``run_sink``), which owns signals, retries and the exit
status through ``streams.runner``.
"""

from __future__ import annotations

from typing import Any, Literal

import click

from streams.cli.options import (check_kube_options, cluster_of_context, cluster_option,
                                 http_port_option, kafka_options, kube_options)
from streams.cli.options import http_port as chosen_port

WATCH_TIMEOUT = 60
READ_TIMEOUT = 90.0


@click.command(short_help="list+watch gang Pods, PodGroups and scheduler Events into gang-events")
@kube_options
@click.option("--namespace", "-n", multiple=True, metavar="NS",
              help="watch this namespace (repeatable; default: all namespaces)")
@click.option("--all-namespaces", "-A", is_flag=True,
              help="watch every namespace (the default without -n)")
@click.option("--scheduler-name", multiple=True, metavar="NAME",
              help="publish pods of this scheduler (repeatable; default: koord-scheduler and "
                   "default-scheduler)")
@click.option("--no-podgroups", is_flag=True,
              help="do not watch Koordinator's PodGroups (scheduling.sigs.k8s.io/v1alpha1)")
@click.option("--no-native-podgroups", is_flag=True,
              help="do not watch Kubernetes' own PodGroups, CompositePodGroups and Workloads "
                   "(scheduling.k8s.io)")
@http_port_option("serve Prometheus metrics on this port (/metrics)")
@click.option("--tick-interval", type=float, default=1.0, show_default=True, metavar="SECONDS",
              help="seconds between clock ticks to every partition")
@click.option("--watch-timeout", type=int, default=WATCH_TIMEOUT, show_default=True,
              metavar="SECONDS",
              help="server-side timeoutSeconds of one watch request: the API server ends it "
                   "then and the watch resumes (at least 5 s below --read-timeout)")
@click.option("--read-timeout", type=float, default=READ_TIMEOUT, show_default=True,
              metavar="SECONDS", help="a watch connection silent this long is reconnected")
@click.option("--queue-size", type=int, default=1000, show_default=True,
              help="watch events buffered before the watches are slowed")
@cluster_option("the cluster watched: outside 'default' every record says so and is keyed "
                "CLUSTER:<gang id> (docs/fleet.md)", context=True)
@kafka_options
def watch(kubeconfig: str | None, context: str | None, in_cluster: bool,
          namespace: tuple[str, ...], all_namespaces: bool, scheduler_name: tuple[str, ...],
          no_podgroups: bool, no_native_podgroups: bool, http_port: int | None, http_bind: str,
          web_port_alias: int | None, metrics_port_alias: int | None, tick_interval: float, watch_timeout: int,
          read_timeout: float, queue_size: int, cluster: str | None, bootstrap: str | None,
          prefix: str | None, kafka_security: dict[str, Any]) -> int:
    """List and watch gang Pods, PodGroups and scheduler Events and publish them to the
    gang-events topic (Kafka from KAFKA_BOOTSTRAP_SERVERS). One watch per cluster: outside the
    'default' cluster (--cluster, GANGSTATE_CLUSTER) each record carries its cluster."""
    from producers.watch.running import WatchOptions, run_watch

    check_kube_options(kubeconfig, in_cluster)
    if namespace and all_namespaces:
        raise click.UsageError("-n/--namespace and -A/--all-namespaces exclude each other")
    return run_watch(WatchOptions(
        kubeconfig=kubeconfig, context=context, in_cluster=in_cluster,
        namespaces=namespace, scheduler_names=scheduler_name, podgroups=not no_podgroups,
        native=not no_native_podgroups,
        http_port=chosen_port(http_port, web_port_alias, metrics_port_alias),
        http_bind=http_bind, tick_interval=tick_interval, watch_timeout=watch_timeout,
        read_timeout=read_timeout, queue_size=queue_size,
        cluster=cluster_of_context(cluster, context), bootstrap=bootstrap,
        prefix=prefix, kafka_security=kafka_security))



@click.command(short_help="write diagnostics to Kubernetes as Events (kubectl describe pod)")
@kube_options
@click.option("--dry-run", is_flag=True,
              help="contact no API server: print each create/patch as a JSON line")
@click.option("--api", type=click.Choice(("core/v1", "events.k8s.io/v1")), default="core/v1",
              show_default=True,
              help="Event API to write (core/v1: count, firstTimestamp, lastTimestamp; "
                   "events.k8s.io/v1 writes series instead)")
@click.option("--instance", default=None, help="reportingInstance (default: the host name)")
@click.option("--input", "input_", metavar="PATH",
              help="read diagnostics from a file (JSON lines or `gangstate fold -o json` "
                   "output; - = stdin) instead of Kafka")
@click.option("--spam-burst", type=int, default=25, show_default=True,
              help="Events per involved object at once (as client-go)")
@click.option("--spam-refill-seconds", type=float, default=300.0, show_default=True,
              help="seconds per refilled token (as client-go)")
@http_port_option("serve Prometheus metrics on this port (/metrics)")
@cluster_option("the cluster whose API server the Events are written to: only its "
                "diagnostics are written, the others skipped (docs/fleet.md)", context=True)
@kafka_options
def sink(kubeconfig: str | None, context: str | None, in_cluster: bool, dry_run: bool,
         api: Literal["core/v1", "events.k8s.io/v1"], instance: str | None, input_: str | None, spam_burst: int,
         spam_refill_seconds: float, http_port: int | None, http_bind: str,
         web_port_alias: int | None, metrics_port_alias: int | None, cluster: str | None,
         bootstrap: str | None, prefix: str | None, kafka_security: dict[str, Any]) -> int:
    """Consume the diagnostics topic (consumer group <app id>-event-sink, and
    <app id>-event-sink-CLUSTER outside the 'default' cluster) and write one Kubernetes Event
    per (involved object, reason, field), deduped and counted like client-go's event recorder;
    idempotent across restarts and replays (docs/events.md). One sink per cluster: it writes
    the diagnostics of its cluster (--cluster, GANGSTATE_CLUSTER) and skips the others. Exit
    status 0 when stopped (SIGTERM, SIGINT) or at the end of --input; 1 when every diagnostic
    of --input is invalid; 2 for a configuration error or an unreadable --input."""
    from streams.events.sink import SinkOptions, run_sink

    check_kube_options(kubeconfig, in_cluster)
    return run_sink(SinkOptions(
        kubeconfig=kubeconfig, context=context, in_cluster=in_cluster, dry_run=dry_run,
        api=api, instance=instance, input=input_, spam_burst=spam_burst,
        spam_refill_seconds=spam_refill_seconds,
        http_port=chosen_port(http_port, web_port_alias, metrics_port_alias),
        http_bind=http_bind, cluster=cluster_of_context(cluster, context), bootstrap=bootstrap,
        prefix=prefix, kafka_security=kafka_security))


COMMANDS = (watch, sink)
