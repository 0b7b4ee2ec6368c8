"""``gangstate`` commands of the Kafka pipeline: demo, worker, replay, tap.

Where it sits: the CLI; each command parses its flags and calls the module that does the work
(``streams.dev.demo``, ``streams.worker.app``, ``producers.replay``, ``streams.kafka.reading``).
Kafka is found with ``KAFKA_BOOTSTRAP_SERVERS`` (or ``--bootstrap``), topics with
``GANGSTATE_TOPIC_PREFIX`` (or ``--prefix``), both read by ``streams.kafka.settings``.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click

from streams.cli.options import _at, http_port_option, kafka_options
from streams.cli.options import http_port as chosen_port
from streams.kafka.settings import KafkaSecurity, Settings


def kafka_settings(bootstrap: str | None, prefix: str | None,
                   kafka_security: dict[str, Any] | None = None) -> Settings:
    """The environment's settings with ``--bootstrap``, ``--prefix`` and the security flags
    applied (``Settings.with_flags``)."""
    return Settings.from_env().with_flags(bootstrap, prefix, kafka_security)


def _need_kafka(settings: Settings, command: str) -> bool:
    if settings.bootstrap:
        return True
    print(f"gangstate {command}: no Kafka: set KAFKA_BOOTSTRAP_SERVERS (or --bootstrap); "
          f"`python deploy/kafka/broker.py run` starts a local one", file=sys.stderr)
    return False


@click.command(short_help="the main job: local Kafka, a worker, the bundled traces")
@click.argument("trace", nargs=-1)
@click.option("--cluster", is_flag=True,
              help="run on the real local control plane instead (etcd, kube-apiserver, "
                   "koord-scheduler v1.8.0; built on first use, ~7 min on 2 cores, then "
                   "cached): gang jobs held, unfit and fitting, and what the scheduler and "
                   "gangstate wrote on each pod (about 75 s once built)")
@kafka_options
def demo(trace: tuple[str, ...], cluster: bool, bootstrap: str | None,
         prefix: str | None, kafka_security: dict[str, Any]) -> int:
    """Start the local single-node Kafka (unless KAFKA_BOOTSTRAP_SERVERS is set) and a worker,
    replay the bundled traces (or TRACE...), print the diagnostics and commands read back from
    Kafka, compare them with the offline fold, and stop everything started. Exit 0 when both
    agree."""
    from streams.dev.demo import run_demo

    traces = [Path(p) for p in trace] if trace else None
    settings = kafka_settings(bootstrap, prefix, kafka_security)

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    # SIGTERM (kill, timeout, a CI cancel) stops the demo as Ctrl-C does: everything it
    # started is stopped on the way out
    signal.signal(signal.SIGTERM, interrupt)
    if settings.bootstrap and not _kafka_reachable(settings.bootstrap, settings.security):
        print(f"gangstate demo: cannot reach Kafka at {settings.bootstrap} "
              f"(KAFKA_BOOTSTRAP_SERVERS); unset it to use a local one", file=sys.stderr)
        return 1
    try:
        if cluster:
            if traces:
                print("gangstate demo: --cluster takes no traces", file=sys.stderr)
                return 2
            from streams.dev.cluster_demo import run_cluster_demo
            from streams.dev.localcluster import controlplane_module

            try:
                return run_cluster_demo(settings=settings)
            except controlplane_module().ClusterError as err:
                print(f"gangstate demo --cluster: {err}", file=sys.stderr)
                return 1
        return run_demo(traces, settings=settings)
    except KeyboardInterrupt:
        print("gangstate demo: interrupted; everything it started was stopped", file=sys.stderr)
        return 130


def _kafka_reachable(bootstrap: str, security: KafkaSecurity | None = None,
                     timeout: float = 5.0) -> bool:
    """Whether any broker of ``host:port[,host:port]`` answers a metadata request, spoken
    with ``security`` (TLS and SASL as every other client; ``None``: PLAINTEXT): a broker that
    refuses the handshake or the credentials counts as unreachable. ``timeout``: seconds per
    broker."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    config = (security or KafkaSecurity()).kafka_python()
    for address in bootstrap.split(","):
        try:
            probe = KafkaConsumer(bootstrap_servers=address.strip(), group_id=None,
                                  client_id="gangstate-probe",
                                  bootstrap_timeout_ms=int(timeout * 1000),
                                  request_timeout_ms=int(timeout * 1000),
                                  **config)
        except (KafkaError, OSError, ValueError):
            continue
        try:
            probe.topics()  # a metadata request
            return True
        except (KafkaError, OSError, ValueError):
            continue
        finally:
            probe.close()
    return False


@click.command(short_help="run the Faust worker (fold + decisions)")
@kafka_options
@http_port_option("serve the worker's views (/gangs, /pods/.../why) and /metrics on "
                  "this port (default: off)")
@click.option("--advertise-host", metavar="HOST", default=None,
              help="address the other workers forward requests for this worker's gangs to "
                   "(default: $POD_IP, else --http-bind unless it is 0.0.0.0, else the host "
                   "name)")
@click.option("--loglevel", default="warning", show_default=True, help="Faust log level")
def worker(bootstrap: str | None, prefix: str | None, kafka_security: dict[str, Any],
           http_port: int | None, http_bind: str, web_port_alias: int | None,
           metrics_port_alias: int | None, advertise_host: str | None, loglevel: str) -> int:
    """Consume gang-events, keep the gang table, write diagnostics, commands and dead letters.
    Runs until SIGINT/SIGTERM. With --http-port, any worker answers a view for any gang: a
    request for a gang another worker owns is forwarded to the address that worker
    advertises."""
    from streams.worker.app import run_worker

    port = chosen_port(http_port, web_port_alias, metrics_port_alias)
    settings = kafka_settings(bootstrap, prefix, kafka_security)
    if not _need_kafka(settings, "worker"):
        return 2
    run_worker(settings, web_port=port, web_bind=http_bind,
               web_host=advertise_host, loglevel=loglevel)
    return 0



@click.command(short_help="publish traces into gang-events")
@click.argument("trace", nargs=-1, required=True)
@click.option("--rate", type=float, default=None, help="records per second (default: max)")
@click.option("--at", default=None, help="event time of the final ticks (default: now)")
@click.option("--no-tick", is_flag=True, help="do not end with ticks")
@click.option("--merge-by-time", is_flag=True,
              help="publish the records of all traces in observed_at order (stable) instead of "
                   "file after file")
@kafka_options
def replay(trace: tuple[str, ...], rate: float | None, at: str | None, no_tick: bool,
           merge_by_time: bool, bootstrap: str | None, prefix: str | None,
           kafka_security: dict[str, Any]) -> int:
    """Publish each record of the traces, keyed by gang id, with acks=all; pods of no gang are
    dropped and counted; malformed lines are reported with their line number and skipped. Ends
    with one tick per partition at --at."""
    from producers.replay import file_lines, merged_by_time, replay as publish
    from producers.watch.dump import trace_lines

    settings = kafka_settings(bootstrap, prefix, kafka_security)
    if not _need_kafka(settings, "replay"):
        return 2
    tick_at = None if no_tick else _at(at)
    paths = [Path(p) for p in trace]
    for path in paths:
        if not path.is_file():
            print(f"gangstate replay: not a readable file: {path}", file=sys.stderr)
            return 2
    lines = (merged_by_time(paths, trace_lines) if merge_by_time
             else file_lines(paths, trace_lines))
    report = publish(lines, settings, rate=rate, at=tick_at,
                     on_malformed=lambda f, n, e: print(f"{f}:{n}: skipped malformed record: "
                                                        f"{e}", file=sys.stderr))
    dropped = ", ".join(f"{n} {r}" for r, n in sorted(report.dropped.items())) or "none"
    print(f"published {report.published} records to {settings.topics.gang_events}, "
          f"{report.ticks} ticks; dropped: {dropped}; malformed: {len(report.malformed)}")
    return 0


@click.command(short_help="print a topic's records as JSON lines (auditing)")
@click.argument("topic")
@click.option("--from-beginning", is_flag=True, help="start at the earliest offset")
@click.option("--follow", "-f", is_flag=True, help="keep reading new records")
@click.option("--schema", help="only records with this schema (e.g. gangstate.cycle/v1)")
@kafka_options
def tap(topic: str, from_beginning: bool, follow: bool, schema: str | None,
        bootstrap: str | None, prefix: str | None, kafka_security: dict[str, Any]) -> int:
    """Read TOPIC without joining a consumer group and print each value as one JSON line.
    TOPIC may be short (gang-events, diagnostics, commands, dead-letters)."""
    from streams.kafka.reading import NoSuchTopic, tap as read

    settings = kafka_settings(bootstrap, prefix, kafka_security)
    if not _need_kafka(settings, "tap"):
        return 2
    try:
        read(settings, settings.topics.resolve(topic), from_beginning=from_beginning,
             follow=follow, schema=schema)
    except NoSuchTopic as err:
        print(f"gangstate tap: no topic {err.args[0]!r} on {settings.bootstrap}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


COMMANDS = (demo, worker, replay, tap)
