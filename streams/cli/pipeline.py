"""``gangstate`` commands of the Kafka pipeline: demo, worker, replay, tap.

Where it sits: the CLI; each command parses its flags and calls the module that does the work
(``streams.dev.demo``, ``streams.worker.app``, ``producers.replay``, ``streams.kafka.reading``).
``replay`` publishes into topics of its own and folds them with a worker of its own
(``streams.dev.worker_process``) unless ``--into-live`` says otherwise.
Kafka is found with ``KAFKA_BOOTSTRAP_SERVERS`` (or ``--bootstrap``), topics with
``GANGSTATE_TOPIC_PREFIX`` (or ``--prefix``), both read by ``streams.settings``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Iterable

import click

from streams.cli.options import CLUSTER, _at, http_port_option, kafka_options, timeout_option
from streams.cli.options import http_port as chosen_port
from streams.settings import KafkaSecurity, Settings


def records_cluster_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--cluster CLUSTER`` of the commands that read traces and dumps (``fold``, ``replay``):
    the cluster of the records that name none (a cluster dump's, an old trace's); a record
    that names its cluster keeps it. Not read from ``GANGSTATE_CLUSTER``: without the flag a
    record without ``cluster`` stays of ``default``, as recorded (docs/fleet.md). The command
    receives ``cluster`` (``"default"`` when not given)."""
    return click.option(
        "--cluster", "cluster", type=CLUSTER, default="default", metavar="CLUSTER",
        help="the cluster of the records that name none, e.g. those of a cluster dump (a "
             "DNS-1123 label; default 'default'; records naming a cluster keep theirs; "
             "$GANGSTATE_CLUSTER is not read)")(f)


def kafka_settings(bootstrap: str | None, prefix: str | None,
                   kafka_security: dict[str, Any] | None = None) -> Settings:
    """The environment's settings with ``--bootstrap``, ``--prefix`` and the security flags
    applied (``Settings.with_flags``)."""
    return Settings.from_env().with_flags(bootstrap, prefix, kafka_security)


def wait_for_kafka(settings: Settings, command: str, bootstrap_flag: str | None,
                   timeout: float) -> None:
    """Wait up to ``timeout`` seconds for Kafka (``streams.kafka.waiting.wait_for_kafka``),
    saying so on stderr at the first failed attempt; raises ``Failure`` (1) after it."""
    from streams.kafka.waiting import kafka_source, wait_for_kafka as wait

    wait(settings, f"gangstate {command}", source=kafka_source(bootstrap_flag), timeout=timeout)


def _need_kafka(settings: Settings, command: str) -> bool:
    if settings.bootstrap:
        return True
    print(f"gangstate {command}: no Kafka: set KAFKA_BOOTSTRAP_SERVERS (or --bootstrap); "
          f"`python deploy/kafka/broker.py run` starts a local one", file=sys.stderr)
    return False


@click.command(short_help="the main job: local Kafka, a worker, the recorded cases")
@click.argument("trace", nargs=-1)
@click.option("--cluster", is_flag=True,
              help="run on the real local control plane instead (etcd, kube-apiserver, "
                   "koord-scheduler v1.8.0; built on first use, ~7 min on 2 cores, then "
                   "cached): gang jobs held, unfit and fitting, and what the scheduler and "
                   "gangstate wrote on each pod (about 75 s once built)")
@click.option("--scheduler", type=click.Choice(("koord-scheduler", "kube-scheduler")),
              default="koord-scheduler", show_default=True,
              help="with --cluster: whose gang scheduling to show: Koordinator's koord-scheduler "
                   "v1.8.0, or Kubernetes' own (kube-scheduler v1.37.2, PodGroups of "
                   "scheduling.k8s.io; a control plane of its own, built on first use, about "
                   "10 min on 2 cores)")
@kafka_options
def demo(trace: tuple[str, ...], cluster: bool, scheduler: str, bootstrap: str | None,
         prefix: str | None, kafka_security: dict[str, Any]) -> int:
    """Start the local single-node Kafka (unless KAFKA_BOOTSTRAP_SERVERS is set) and a worker,
    replay the cases recorded on koord-scheduler v1.8.0 (tests/cases/recorded, or TRACE...),
    print per gang what the scheduler wrote beside what gangstate writes on each pod (read back
    from Kafka), compare them with the offline fold, and stop everything started. Exit 0 when
    both agree."""
    from streams.dev.demo import run_demo
    from streams.kafka.waiting import EXIT_TERMINATED, Stopped

    traces = [Path(p) for p in trace] if trace else None
    settings = kafka_settings(bootstrap, prefix, kafka_security)
    # SIGTERM (kill, timeout, a CI cancel) raises Stopped (streams.cli.main), and stops the
    # demo as Ctrl-C does: everything it started is stopped on the way out
    if settings.bootstrap and not _kafka_reachable(settings.bootstrap, settings.security):
        print(f"gangstate demo: cannot reach Kafka at {settings.bootstrap} "
              f"(KAFKA_BOOTSTRAP_SERVERS); unset it to use a local one", file=sys.stderr)
        return 1
    if scheduler != "koord-scheduler" and not cluster:
        print("gangstate demo: --scheduler goes with --cluster (the bundled recordings are "
              "koord-scheduler's)", file=sys.stderr)
        return 2
    try:
        if cluster:
            if traces:
                print("gangstate demo: --cluster takes no traces", file=sys.stderr)
                return 2
            from streams.dev.cluster_demo import run_cluster_demo
            from streams.dev.localcluster import controlplane_module

            try:
                return run_cluster_demo(settings=settings, scheduler=scheduler)
            except controlplane_module().ClusterError as err:
                print(f"gangstate demo --cluster: {err}", file=sys.stderr)
                return 1
        return run_demo(traces, settings=settings)
    except KeyboardInterrupt:
        print("gangstate demo: interrupted; everything it started was stopped", file=sys.stderr)
        return 130
    except Stopped:
        print("gangstate demo: stopped by SIGTERM; everything it started was stopped",
              file=sys.stderr)
        return EXIT_TERMINATED


def _kafka_reachable(bootstrap: str, security: KafkaSecurity | None = None,
                     timeout: float = 5.0) -> bool:
    """Whether any broker of ``host:port[,host:port]`` answers a metadata request, spoken
    with ``security`` (``streams.kafka.waiting.kafka_unreachable``). ``timeout``: seconds per
    broker."""
    from streams.kafka.waiting import kafka_unreachable

    return kafka_unreachable(bootstrap, security, timeout) is None


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
    Runs until SIGINT/SIGTERM (exit status 0). While Kafka cannot be reached it retries with
    backoff, logging one line every 10 s at most, and /readyz on --http-port answers 503 with
    the reason (200 once its partitions are assigned). With --http-port, any worker answers a view for any gang: a
    request for a gang another worker owns is forwarded to the address that worker
    advertises."""
    from streams.worker.app import run_worker

    port = chosen_port(http_port, web_port_alias, metrics_port_alias)
    settings = kafka_settings(bootstrap, prefix, kafka_security)
    if not _need_kafka(settings, "worker"):
        return 2
    from streams.kafka.waiting import kafka_source

    return run_worker(settings, web_port=port, web_bind=http_bind, web_host=advertise_host,
                      loglevel=loglevel, source=kafka_source(bootstrap))



FOLD_TIMEOUT_SECONDS = 600.0
"""How long ``gangstate replay`` waits for its own worker to fold everything it published."""


def replay_target(live: Settings, *, into_live: bool, name: str | None,
                  now: float | None = None) -> Settings:
    """Where ``gangstate replay`` publishes: ``live`` itself with ``--into-live``, else the
    replay's own topics and app id (``producers.replay.own_settings``) named ``name``
    (default: ``default_name(now)``, its start time). Raises ``click.UsageError`` (exit 2)
    for a bad name or ``--name`` with ``--into-live``."""
    from producers.replay import default_name, own_settings

    if into_live:
        if name is not None:
            raise click.UsageError("--name names a replay's own topics; --into-live "
                                   "publishes into the live ones")
        return live
    try:
        return own_settings(live, name if name is not None else default_name(now))
    except ValueError as err:
        raise click.UsageError(f"--name: {err}") from None


def _how_to_read(target: Settings) -> list[str]:
    """The command lines that read a replay's own topics (printed by ``gangstate replay``)."""
    prefix = target.topics.prefix
    return ["read it with:",
            f"  gangstate tap diagnostics --prefix {prefix} --from-beginning",
            f"  GANGSTATE_APP_ID={target.app_id} gangstate worker --prefix {prefix} "
            "--http-port 6067",
            "  gangstate get gangs --server http://127.0.0.1:6067   "
            "(describe gang, explain pod likewise)"]


@click.command(short_help="replay traces on topics of their own (or, --into-live, the live ones)")
@click.argument("trace", nargs=-1, required=True)
@click.option("--rate", type=float, default=None, help="records per second (default: max)")
@click.option("--at", default=None, help="event time of the final ticks (default: now)")
@click.option("--no-tick", is_flag=True, help="do not end with ticks")
@click.option("--merge-by-time", is_flag=True,
              help="publish the records of all traces in observed_at order (stable) instead of "
                   "file after file")
@click.option("--name", default=None, metavar="NAME",
              help="the replay's name: topics <prefix>replay-NAME. and app id "
                   "<app id>-replay-NAME (default: its start time, YYYYMMDD-HHMMSS UTC); a "
                   "name used before adds to that replay")
@click.option("--no-worker", is_flag=True,
              help="only publish to the replay's topics; fold them later with the worker "
                   "command it prints")
@click.option("--into-live", is_flag=True,
              help="publish into the live gang-events, folded by the live worker among the "
                   "live records (its outputs reach the live sink and shim): a record older "
                   "than its partition's clock fires its gang's timers at once; prints the "
                   "clocks on stderr first")
@http_port_option("keep the replay's own worker running once it has folded the replay, "
                  "serving its views (get, describe, explain --server) on this port, until "
                  "Ctrl-C")
@records_cluster_option
@kafka_options
@timeout_option("Kafka")
def replay(trace: tuple[str, ...], rate: float | None, at: str | None, no_tick: bool,
           merge_by_time: bool, name: str | None, no_worker: bool, into_live: bool,
           http_port: int | None, http_bind: str, web_port_alias: int | None,
           metrics_port_alias: int | None, cluster: str, bootstrap: str | None,
           prefix: str | None, kafka_security: dict[str, Any], timeout: float) -> int:
    """Publish each record of the traces, keyed by gang id, with acks=all; pods of no gang are
    dropped and counted; malformed lines are reported with their line number and skipped. Ends
    with one tick per partition at --at. Records are keyed within their cluster
    (CLUSTER:<gang id> outside 'default'); --cluster gives the records that name none (a
    cluster dump's) that cluster.

    By default the replay gets topics of its own (<prefix>replay-NAME.gang-events, ...) and a
    worker of its own (app id <app id>-replay-NAME), started here and stopped once it has
    folded everything (up to 10 min), so the live partitions' clocks and outputs are never
    touched; it prints the --prefix and app id that tap and a worker for get/describe/explain
    need. --into-live publishes into the live topics instead.

    Exit status: 0 done; 1 the replay's worker failed or had not folded everything in time;
    2 a usage error, an unreadable trace or no Kafka; 130 interrupted (Ctrl-C), 143 stopped
    by SIGTERM (0 when serving with --http-port ends so). Kafka out of reach: it says it waits,
    and gives up after --timeout with exit status 1."""
    from kafka.errors import KafkaError

    from producers.replay import (clock_warning, file_lines, merged_by_time,
                                  replay as publish, reuse_warning, time_span)
    from producers.watch.dump import trace_lines
    from streams.kafka.reading import partition_clocks

    live = kafka_settings(bootstrap, prefix, kafka_security)
    if not _need_kafka(live, "replay"):
        return 2
    port = chosen_port(http_port, web_port_alias, metrics_port_alias)
    if into_live and (no_worker or port is not None):
        raise click.UsageError("--into-live runs no worker of its own: it excludes "
                               "--no-worker and --http-port")
    if no_worker and port is not None:
        raise click.UsageError("--no-worker and --http-port exclude each other")
    target = replay_target(live, into_live=into_live, name=name)
    tick_at = None if no_tick else _at(at)
    paths = [Path(p) for p in trace]
    for path in paths:
        if not path.is_file():
            print(f"gangstate replay: not a readable file: {path}", file=sys.stderr)
            return 2
    wait_for_kafka(live, "replay", bootstrap, timeout)
    lines: Iterable[tuple[str, int, bytes]] = (
        merged_by_time(paths, trace_lines) if merge_by_time else file_lines(paths, trace_lines))

    def run_publish() -> int:
        report = publish(lines, target, rate=rate, at=tick_at, cluster=cluster,
                         rosters=not into_live,
                         on_malformed=lambda f, n, e: print(f"{f}:{n}: skipped malformed "
                                                            f"record: {e}", file=sys.stderr))
        dropped = ", ".join(f"{n} {r}" for r, n in sorted(report.dropped.items())) or "none"
        print(f"published {report.published} records to {target.topics.gang_events}, "
              f"{report.ticks} ticks; dropped: {dropped}; malformed: {len(report.malformed)}")
        return report.published + report.ticks

    if into_live:
        lines = list(lines)  # read twice: its time span, then the records
        try:
            clocks: dict[int, int | None] | None = partition_clocks(live)
        except KafkaError:
            clocks = None
        print(clock_warning(live.topics.gang_events, clocks, time_span(lines)),
              file=sys.stderr)
        run_publish()
        return 0
    try:  # a --name used before: its topics have clocks of their own already
        held = [c for c in partition_clocks(target).values() if c is not None]
    except KafkaError:
        held = []
    if held:
        lines = list(lines)
        print(reuse_warning(target.topics.prefix, max(held), time_span(lines)),
              file=sys.stderr)
    if no_worker:
        run_publish()
        print(f"not folded yet (--no-worker): app id {target.app_id}")
        for line in _how_to_read(target):
            print(line)
        return 0
    return _replay_with_own_worker(target, run_publish, port, http_bind)


def _replay_with_own_worker(target: Settings, run_publish: Callable[[], int],
                            port: int | None,
                            bind: str) -> int:
    """Start a worker on the replay's own topics, publish (``run_publish()``), wait until the
    worker has folded it all, print what it wrote and how to read it; with ``port``, keep the
    worker serving its views until SIGINT/SIGTERM. Exit status 0, 1 when the worker failed or
    did not catch up within ``FOLD_TIMEOUT_SECONDS``, 130 when interrupted before the end."""
    from streams.dev.worker_process import running_worker
    from streams.kafka.reading import record_counts, wait_caught_up
    from streams.kafka.waiting import EXIT_TERMINATED, Stopped

    # SIGTERM raises Stopped (streams.cli.main) and stops the replay's worker as Ctrl-C does
    args = ("--http-port", str(port), "--http-bind", bind) if port is not None else ()
    t = target.topics
    print(f"replaying into topics of its own ({t.prefix}*), folded by a worker of its own "
          f"(app id {target.app_id}); the live topics and their clocks are not touched",
          flush=True)
    try:
        with running_worker(target, extra_args=args) as worker:
            run_publish()
            if not wait_caught_up(target, FOLD_TIMEOUT_SECONDS,
                                  alive=lambda: worker.poll() is None):
                if worker.poll() is not None:
                    return 1  # running_worker raises RuntimeError: reported below
                print(f"gangstate replay: the replay's worker (app id {target.app_id}) did "
                      f"not fold everything within {FOLD_TIMEOUT_SECONDS:.0f} s; to finish, "
                      f"run: {_how_to_read(target)[2].strip()}", file=sys.stderr)
                return 1
            counts = record_counts(target, [t.diagnostics, t.commands])
            diagnostics, commands = counts[t.diagnostics], counts[t.commands]
            print(f"folded by its own worker (app id {target.app_id}): {diagnostics} "
                  f"{'diagnostic' if diagnostics == 1 else 'diagnostics'} in {t.diagnostics}, "
                  f"{commands} {'command' if commands == 1 else 'commands'} in {t.commands}")
            if port is None:
                for line in _how_to_read(target):
                    print(line)
                return 0
            host = "127.0.0.1" if bind == "0.0.0.0" else bind
            print(f"serving its views at http://{host}:{port} until Ctrl-C: "
                  f"gangstate get gangs --server http://{host}:{port}", flush=True)
            try:
                worker.wait()
            except (KeyboardInterrupt, Stopped):  # how serving ends
                return 0
            return 1  # the worker died: running_worker raises RuntimeError, reported below
    except RuntimeError as err:  # the worker did not start or died
        print(f"gangstate replay: the replay's worker failed: {str(err).splitlines()[0]}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("gangstate replay: interrupted; its worker was stopped", file=sys.stderr)
        return 130
    except Stopped:
        print("gangstate replay: stopped by SIGTERM; its worker was stopped", file=sys.stderr)
        return EXIT_TERMINATED


@click.command(short_help="print a topic's records as JSON lines (auditing)")
@click.argument("topic")
@click.option("--from-beginning", is_flag=True, help="start at the earliest offset")
@click.option("--follow", "-f", is_flag=True, help="keep reading new records")
@click.option("--schema", help="only records with this schema (e.g. gangstate.cycle/v1)")
@click.option("--cluster", type=CLUSTER, default=None, metavar="CLUSTER",
              help="only records of this cluster (a DNS-1123 label; a record without a "
                   "cluster field is default's); without it, every cluster's")
@kafka_options
@timeout_option("Kafka")
def tap(topic: str, from_beginning: bool, follow: bool, schema: str | None,
        cluster: str | None, bootstrap: str | None, prefix: str | None,
        kafka_security: dict[str, Any], timeout: float) -> int:
    """Read TOPIC without joining a consumer group and print each value as one JSON line.
    TOPIC may be short (gang-events, diagnostics, commands, dead-letters)."""
    from streams.kafka.reading import NoSuchTopic, tap as read
    from streams.kafka.waiting import Stopped

    settings = kafka_settings(bootstrap, prefix, kafka_security)
    if not _need_kafka(settings, "tap"):
        return 2
    wait_for_kafka(settings, "tap", bootstrap, timeout)
    try:
        read(settings, settings.topics.resolve(topic), from_beginning=from_beginning,
             follow=follow, schema=schema, cluster=cluster)
    except NoSuchTopic as err:
        print(f"gangstate tap: no topic {err.args[0]!r} on {settings.bootstrap}",
              file=sys.stderr)
        return 1
    except (KeyboardInterrupt, Stopped):  # how --follow ends: exit status 0
        pass
    return 0


COMMANDS = (demo, worker, replay, tap)
