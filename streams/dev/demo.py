"""``gangstate demo``: the main job on the embedded default, end to end.

Where it sits: the outermost shell. With no ``KAFKA_BOOTSTRAP_SERVERS`` it starts the local
single-node Kafka (``deploy/kafka/broker.py``); it then starts a worker process, replays the
cases recorded on the real koord-scheduler v1.8.0 (``tests/cases/recorded/*/trace.jsonl``),
reads the diagnostics, commands and the gang table back from Kafka, prints per gang what the
scheduler wrote beside what gangstate writes on each pod (``streams/dev/story.py``), checks the
outputs against the offline fold of the same traces, and stops everything it started. Each run uses its own topic
prefix and application id (time plus a random suffix), so runs never mix, even on a shared
cluster; on a cluster it did not start it removes its topics when it ends.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Callable

from streams.settings import KafkaSecurity, Settings, Topics
from streams.wire.contracts import parse_time
from streams.core.state import from_wire
from streams.dev.localkafka import broker_module, repo_root
from streams.wire.traces import FoldResult, fold_lines
from streams.kafka.partitions import partition_of
from streams.kafka.reading import read_all, read_table, wait_caught_up
from streams.dev.worker_process import running_worker


RECORDED = Path("tests") / "cases" / "recorded"
"""Where the recorded cases live, under the checkout (``tests/cases/recorded/README.md``)."""


def bundled_traces() -> list[Path]:
    """The demo's traces: the cases recorded on the real koord-scheduler v1.8.0
    (``tests/cases/recorded/*/trace.jsonl``), in name order."""
    return sorted((repo_root() / RECORDED).glob("*/trace.jsonl"))


def offline(lines: list[tuple[str, int, bytes]], at: int, settings: Settings) -> FoldResult:
    """Fold the same log the replay publishes, offline."""
    return fold_lines(((n, raw) for _path, n, raw in lines), at, settings.fold,
                      partition_of=partition_of)


def by_gang(records: list[dict[str, Any]], key: str) -> dict[str, list[str]]:
    """Output ids grouped by gang (or gang group), in order: the per-key sequence that the
    Kafka path and the offline fold must agree on."""
    out: dict[str, list[str]] = {}
    for rec in records:
        out.setdefault(rec[key], []).append(rec["id"])
    return out


def _delete_run_topics(settings: Settings, write: Callable[[str], Any]) -> None:
    """On a cluster the demo did not start, remove the topics this run created (its own
    prefix and app id, so nothing else is touched); failures are reported, not raised."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        admin = KafkaAdminClient(**settings.kafka_python(client_id="gangstate-demo"))
        try:
            mine = [t for t in admin.list_topics()
                    if t.startswith(settings.topics.prefix) or t.startswith(settings.app_id + "-")]
            if mine:
                admin.delete_topics(mine)
            write(f"removed this run's {len(mine)} topics")
        finally:
            admin.close()
    except KafkaError as err:
        write(f"could not remove this run's topics ({err}); they start with "
              f"{settings.topics.prefix} and {settings.app_id}-")


def demo_kafka(base: Settings, write: Callable[[str], Any]) -> tuple[Any, Settings]:
    """The demo's Kafka and settings: the local broker started when ``base`` names none
    (returned, for the caller to stop; else ``None``), and a topic prefix and app id of this
    run's own (``<prefix>demo-<time>-<random>.``, ``gangstate-demo-<time>-<random>``). Raises
    the broker module's ``BrokerError`` when the local Kafka cannot start."""
    run_id = f"{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:6]}"
    broker = None
    if not base.bootstrap:
        started = time.monotonic()
        write("starting the local single-node Kafka (KRaft) ...")
        broker = broker_module().LocalKafka()
        bootstrap = broker.start()
        write(f"  Kafka at {bootstrap} ({time.monotonic() - started:.1f} s)")
    else:
        bootstrap = base.bootstrap
        write(f"using Kafka at {bootstrap}")
    return broker, Settings(bootstrap=bootstrap,
                            topics=Topics(f"{base.topics.prefix}demo-{run_id}."),
                            partitions=base.partitions, app_id=f"gangstate-demo-{run_id}",
                            fold=base.fold, cluster=base.cluster,
                            security=base.security if broker is None else KafkaSecurity())


def run_demo(traces: list[Path] | None = None, *, settings: Settings | None = None,
             write: Callable[[str], Any] = print, timeout: float = 180.0) -> int:
    """Run the demo; returns 0 when the Kafka path matched the offline fold, 1 otherwise.

    Raises the broker module's ``BrokerError`` when the local Kafka cannot start.
    """
    from producers.replay import merged_by_time, replay

    from streams.dev.story import cases_of
    from streams.dev.story import report as story

    base = settings or Settings.from_env()
    traces = traces or bundled_traces()
    started = time.monotonic()
    broker, settings = demo_kafka(base, write)
    try:
        at = parse_time(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        lines = merged_by_time(traces)
        expected = offline(lines, at, settings)
        with running_worker(settings) as worker:
            write(f"worker started; replaying {len(traces)} "
                  f"{'trace' if len(traces) == 1 else 'traces'} (merged by event time) into "
                  f"{settings.topics.gang_events} ...")
            report = replay(lines, settings, at=at,
                            on_malformed=lambda f, n, e: write(f"  {f}:{n}: skipped: {e}"))
            write(f"  published {report.published} records and {report.ticks} ticks"
                  + (f"; dropped {dict(report.dropped)}" if report.dropped else ""))
            t = settings.topics
            if not wait_caught_up(settings, timeout, alive=lambda: worker.poll() is None):
                write("the worker did not catch up in time (or died); showing what it wrote")
            got = read_all(settings, [t.diagnostics, t.commands])
            table = read_table(settings)
        result = FoldResult(diagnostics=got[t.diagnostics], commands=got[t.commands],
                            states={k: from_wire(v) for k, v in table.items()})
        write("")
        write(story(cases_of(lines), result).rstrip())
        write("")
        same = (by_gang(result.diagnostics, "gang") == by_gang(expected.diagnostics, "gang")
                and by_gang(result.commands, "gang_group")
                == by_gang(expected.commands, "gang_group"))
        write(f"{len(result.diagnostics)} diagnostics and {len(result.commands)} "
              f"{'command' if len(result.commands) == 1 else 'commands'} read "
              f"back from Kafka; offline fold of the same traces: "
              f"{'identical' if same else 'DIFFERENT'} "
              f"({time.monotonic() - started:.1f} s in all)")
        return 0 if same else 1
    finally:
        if broker is not None:
            broker.stop()
            write("local Kafka stopped")
        else:
            _delete_run_topics(settings, write)
