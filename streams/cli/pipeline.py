"""``gangstate`` subcommands that talk to Kafka: worker, replay, tap, demo (and the ones that
producers register: watch, simulate).

Where it sits: the CLI shell; each handler parses flags and calls the module that does the work.
Kafka is found with ``KAFKA_BOOTSTRAP_SERVERS`` (or ``--bootstrap``), topics with
``GANGSTATE_TOPIC_PREFIX`` (``streams.kafka.settings``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from streams.kafka.settings import Settings, Topics


def _settings(args: argparse.Namespace) -> Settings:
    settings = Settings.from_env()
    if getattr(args, "bootstrap", None):
        settings = dataclasses.replace(settings, bootstrap=args.bootstrap)
    if getattr(args, "prefix", None):
        settings = dataclasses.replace(settings, topics=Topics(args.prefix))
    return settings


def _need_kafka(settings: Settings, command: str) -> bool:
    if settings.bootstrap:
        return True
    print(f"gangstate {command}: no Kafka: set KAFKA_BOOTSTRAP_SERVERS (or --bootstrap); "
          f"`python deploy/kafka/broker.py run` starts a local one", file=sys.stderr)
    return False


def cmd_worker(args: argparse.Namespace) -> int:
    """``gangstate worker``: run the Faust worker until SIGINT/SIGTERM."""
    from streams.worker.app import run_worker

    settings = _settings(args)
    if not _need_kafka(settings, "worker"):
        return 2
    run_worker(settings, web_port=args.web_port, loglevel=args.loglevel)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """``gangstate replay TRACE...``: publish traces into gang-events."""
    from producers.replay import file_lines, merged_by_time, replay

    from streams.cli.options import _at

    settings = _settings(args)
    if not _need_kafka(settings, "replay"):
        return 2
    at = None if args.no_tick else _at(args.at)
    paths = [Path(p) for p in args.trace]
    for path in paths:
        if not path.is_file():
            print(f"gangstate replay: not a readable file: {path}", file=sys.stderr)
            return 2
    lines = merged_by_time(paths) if args.merge_by_time else file_lines(paths)
    report = replay(lines, settings, rate=args.rate, at=at,
                    on_malformed=lambda f, n, e: print(f"{f}:{n}: skipped malformed record: {e}",
                                                       file=sys.stderr))
    dropped = ", ".join(f"{n} {r}" for r, n in sorted(report.dropped.items())) or "none"
    print(f"published {report.published} records to {settings.topics.gang_events}, "
          f"{report.ticks} ticks; dropped: {dropped}; malformed: {len(report.malformed)}")
    return 0


def cmd_tap(args: argparse.Namespace) -> int:
    """``gangstate tap TOPIC``: print a topic's records as JSON lines."""
    from streams.kafka.reading import NoSuchTopic, tap

    settings = _settings(args)
    if not _need_kafka(settings, "tap"):
        return 2
    try:
        tap(settings, settings.topics.resolve(args.topic), from_beginning=args.from_beginning,
            follow=args.follow, schema=args.schema)
    except NoSuchTopic as err:
        print(f"gangstate tap: no topic {err.args[0]!r} on {settings.bootstrap}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """``gangstate demo``: local Kafka + worker + replay of the bundled traces."""
    from streams.dev.demo import run_demo

    traces = [Path(p) for p in args.trace] if args.trace else None
    try:
        if args.cluster:
            if traces:
                print("gangstate demo: --cluster takes no traces", file=sys.stderr)
                return 2
            from streams.dev.cluster_demo import run_cluster_demo
            from streams.dev.localcluster import controlplane_module

            try:
                return run_cluster_demo(settings=_settings(args))
            except controlplane_module().ClusterError as err:
                print(f"gangstate demo --cluster: {err}", file=sys.stderr)
                return 1
        return run_demo(traces, settings=_settings(args))
    except KeyboardInterrupt:
        print("gangstate demo: interrupted; everything it started was stopped", file=sys.stderr)
        return 130


def _kafka_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap", help="Kafka bootstrap servers host:port[,host:port] "
                                       "(default: $KAFKA_BOOTSTRAP_SERVERS)")
    p.add_argument("--prefix", help="topic prefix (default: $GANGSTATE_TOPIC_PREFIX or "
                                    "'gangstate.')")


def add_commands(sub: Any) -> None:
    """Register demo, worker, replay, tap, watch, simulate, sink, get, describe and explain."""
    p = sub.add_parser("demo", help="the main job: local Kafka, a worker, the bundled traces",
                       description="Start the local single-node Kafka (unless "
                                   "KAFKA_BOOTSTRAP_SERVERS is set) and a worker, replay the "
                                   "bundled traces, print the diagnostics and commands read "
                                   "back from Kafka, compare them with the offline fold, and "
                                   "stop everything started. Exit 0 when both agree.")
    p.add_argument("trace", nargs="*", help="traces to replay (default: the bundled ones)")
    p.add_argument("--cluster", action="store_true",
                   help="run on the real local control plane instead (etcd, kube-apiserver, "
                        "koord-scheduler v1.8.0; built on first use, ~5-20 min, then cached): "
                        "gang jobs held, unfit and fitting, and what the scheduler and "
                        "gangstate wrote on each pod (about 2 min once built)")
    _kafka_flags(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("worker", help="run the Faust worker (fold + decisions)",
                       description="Consume gang-events, keep the gang table, write "
                                   "diagnostics, commands and dead letters. Runs until "
                                   "SIGINT/SIGTERM.")
    _kafka_flags(p)
    p.add_argument("--web-port", type=int, default=None,
                   help="serve the worker's HTTP views on 127.0.0.1:PORT (default: off)")
    p.add_argument("--loglevel", default="warning", help="Faust log level (default warning)")
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("replay", help="publish traces into gang-events",
                       description="Publish each record of the traces, keyed by gang id, with "
                                   "acks=all; pods of no gang are dropped and counted; malformed "
                                   "lines are reported with their line number and skipped. Ends "
                                   "with one tick per partition at --at.")
    p.add_argument("trace", nargs="+", help="JSON-lines traces, published in order")
    p.add_argument("--rate", type=float, default=None, help="records per second (default: max)")
    p.add_argument("--at", default=None, help="event time of the final ticks (default: now)")
    p.add_argument("--no-tick", action="store_true", help="do not end with ticks")
    p.add_argument("--merge-by-time", action="store_true",
                   help="publish the records of all traces in observed_at order (stable) "
                        "instead of file after file")
    _kafka_flags(p)
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("tap", help="print a topic's records as JSON lines (auditing)",
                       description="Read a topic without joining a consumer group and print "
                                   "each value as one JSON line. TOPIC may be short "
                                   "(gang-events, diagnostics, commands, dead-letters).")
    p.add_argument("topic")
    p.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    p.add_argument("--follow", "-f", action="store_true", help="keep reading new records")
    p.add_argument("--schema", help="only records with this schema (e.g. gangstate.cycle/v1)")
    _kafka_flags(p)
    p.set_defaults(func=cmd_tap)

    # imported here, not at module level, so that ``gangstate fold`` starts without them; a
    # broken import fails every command loudly instead of silently removing one
    from producers.simulate import add_command as add_simulate
    from producers.watch.watching import add_command as add_watch
    from streams.cli.query import add_command as add_query
    from streams.events.sink import add_command as add_sink

    for add in (add_watch, add_simulate, add_sink, add_query):
        add(sub)
