"""The Faust worker: records -> app -> topics -> gang table -> agent (a wiring diagram).

Where it sits: the streaming shell around the functional core. One agent reads ``gang-events``
(the one ordered input log, keyed by gang id) with concurrency 1, so per-key order holds
(faust-streaming #606 loses messages on restart with more). Per Kafka partition it keeps one
``PartitionFold`` (the core's driver: event-time clock and timers) over the gang table; the
table's changelog is co-partitioned with ``gang-events`` (same partition count, and every write
happens while processing a record of the key's own partition). On every partition assignment
the table is loaded from its changelog in bulk (``BulkRecoveryStore``, before Faust's own
record-by-record recovery, which then has nothing left to read), and the timers of a partition
are rebuilt from the gangs whose stored value says they have one (``encode_state``), so a
restart does not decode every gang. Outputs go to ``diagnostics``
(keyed by gang id) and ``commands`` (keyed by gang group id); a record that fails validation goes
to ``dead-letters`` with the reason and the worker carries on.

The agent does five things: decode, load the table entry, call the core, store it, send the
outputs; it takes records in small batches, and each changed gang is written to the table and
its changelog once per offset commit (before the commit, so the changelog is never behind a
committed offset). ``gangstate.gang-summary/v1`` outputs (one gang telling the other gangs of its gang
group about itself) go back into ``gang-events`` keyed by the receiving gang. The agent counts
what it folds in the app's own Prometheus registry (``streams.worker.metrics``). Faust's web server is
off; with ``web_port`` it serves only gangstate's views (``streams.worker.web``: ``/gangs``, ``/pods/…
/why``, ``/metrics``); its built-in ``/table``, ``/router``, ``/graph`` and stats views stay off.

The gang table and its bulk recovery are in ``streams.worker.table``; every change made to Faust
and aiokafka is in ``streams.worker.faust_patches``; this module only wires them.

Must not: decide anything about gangs (that is ``streams.core``), or read the wall clock for
anything but dead letters' ``observed_at``.
"""

from __future__ import annotations

import functools
import gc
import logging
import sys
from datetime import datetime, timezone
from pathlib import Path
from time import perf_counter
from typing import Any

import faust
from pydantic_core import to_json

from streams.core.fold import Output, PartitionFold
from streams.kafka.partitions import partition_of
from streams.core.records import RosterObserved
from streams.settings import KafkaSecurity, Settings, environment, own_app_id
from streams.wire import contracts
from streams.wire.contracts import COMMAND_SCHEMA, SUMMARY_SCHEMA, output_key
from streams.wire.decoding import DecodeError, decode_input
from streams.worker.faust_patches import PatchedApp, RateLimitedWorker
from streams.worker.metrics import WorkerMetrics
from streams.worker.table import GangTable, TableStore

log = logging.getLogger("gangstate.worker")


BATCH = 500
"""Records folded per batch at most. A batch is whatever has been fetched when the agent asks
(``PatchedApp.batches``): it never waits to fill, so it adds no latency."""
BUFFERED = 5000
"""Records held at most between the consumer's fetch and the agent (``PatchedApp.batch_topic``)."""
PRODUCER_BATCH_BYTES = 1024 * 1024
"""Bytes of one partition's batch in the producer (Faust's default: 16 KiB)."""
PRODUCER_LINGER_MS = 2
"""How long the producer waits for more messages before it sends a batch, ms."""
MAX_OUTPUT_BYTES = 1024 * 1024
"""The largest output (diagnostic, command, gang summary) sent, bytes: Kafka's default
``max.message.bytes`` (1048588) holds it. A larger one is not sent; the record that caused it is
dead-lettered with the reason (a send the broker refuses would crash the producer)."""
OWNER_CACHE = 65_536
"""Gang ids whose ``gang-events`` partition (murmur2) the worker remembers."""
QUIET_LOGGERS = ("aiokafka", "kafka", "faust", "mode")
"""Libraries whose DEBUG/INFO records the worker never builds: aiokafka alone creates one log
record per message produced (filtered out later by the handler, but built: ~2 % of the worker's
time at saturation, bench/profiles/worker.txt)."""


def dead_letter(topic: str, partition: int | None, offset: int | None, key: bytes | None,
                value: bytes | None, error: str) -> dict[str, Any]:
    """Build a ``gangstate.dead-letter/v1`` record for a value that failed
    (``streams.wire.contracts.dead_letter``: the value's head, size and sha256, never the
    whole value); ``observed_at`` is the wall clock (dead letters are not fold outputs)."""
    return contracts.dead_letter(
        datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), topic, partition,
        offset, key, value, error)


def kafka_time(message: Any) -> int | None:
    """A Kafka message's timestamp in microseconds (``None`` when it has none)."""
    ts = getattr(message, "timestamp", None)
    if ts is None or ts < 0:
        return None
    return int(ts * 1_000_000)


def _json(record: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON of an output record: ``pydantic_core.to_json`` (pydantic's Rust
    encoder), the same bytes as ``json.dumps(record, separators=(",", ":"),
    ensure_ascii=False)`` for these records (a float below 1e-4 is written positionally,
    ``0.00001`` for ``1e-05``: the same number) at about a third of the CPU."""
    return to_json(record)


def faust_credentials(security: KafkaSecurity) -> dict[str, Any]:
    """Faust's connection settings for ``security``: ``broker_credentials``
    (``faust.SASLCredentials`` with the mechanism, user, password and, with SASL_SSL, the TLS
    context) or, for plain ``SSL``, ``ssl_context``; nothing for PLAINTEXT. Faust hands them to
    every aiokafka client it makes (``faust/transport/drivers/aiokafka.py``,
    ``credentials_to_aiokafka_auth``), and the table's bulk loader takes them from the app."""
    if security.uses_sasl:
        return {"broker_credentials": faust.SASLCredentials(
            username=security.sasl_username, password=security.sasl_password,
            mechanism=security.mechanism, ssl_context=security.ssl_context())}
    if security.uses_ssl:
        return {"ssl_context": security.ssl_context()}
    return {}


def advertised_host(bind: str) -> str:
    """The host a worker advertises for its views when none is given: ``POD_IP`` (the pod's
    address, from the downward API) when set, else ``bind`` unless it is a wildcard
    (``0.0.0.0``, ``::``), else the host name."""
    pod_ip = environment().pod_ip
    if pod_ip:
        return pod_ip
    if bind not in ("0.0.0.0", "::", ""):
        return bind
    import socket

    return socket.gethostname()


def create_app(settings: Settings, *, web_port: int | None = None,
               datadir: str | None = None, web_bind: str = "127.0.0.1",
               web_host: str | None = None) -> faust.App:
    """Build the Faust application for ``settings`` (nothing connects until it runs).

    ``datadir``: Faust's data folder (default ``GANGSTATE_DATA_DIR`` or
    ``~/.cache/gangstate/worker``). ``web_port``: serve gangstate's views (``streams.worker.web``) on
    ``web_bind`` (default 127.0.0.1) at that port (Faust's built-in ``/table``, ``/router``,
    ``/graph`` and stats views stay off); ``None`` turns the web server off. ``web_host``: the
    host the worker advertises to the others (Faust's ``canonical_url``
    ``http://<web_host>:<web_port>``, which its table router forwards requests for this
    worker's keys to; default ``advertised_host(web_bind)``). ``app.gangstate_metrics`` is the app's
    ``WorkerMetrics``.
    Raises ``AssertionError`` when ``settings.bootstrap`` is unset.
    """
    assert settings.bootstrap, "KAFKA_BOOTSTRAP_SERVERS is not set"
    brokers = ";".join(f"kafka://{b.strip()}" for b in settings.bootstrap.split(","))
    app = PatchedApp(
        settings.app_id,
        broker=brokers,
        store="memory://",
        datadir=datadir or environment().data_dir
        or str(Path.home() / ".cache" / "gangstate" / "worker"),
        topic_partitions=settings.partitions,
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
        web_enabled=web_port is not None,
        web_bind=web_bind,
        web_host=web_host or advertised_host(web_bind),
        web_port=web_port or 6066,
        web_tables_enabled=False,
        web_router_enabled=False,
        web_graph_enabled=False,
        web_stats_enabled=False,
        web_in_thread=False,
        # aiokafka keeps one open batch per partition and Faust's producer buffer awaits each
        # send: with 16 KiB batches, the table's writes at a commit (a few KiB per gang) went out
        # a few per round trip and the decisions queued behind them. Big batches, one short
        # linger: a commit's writes leave in a few requests.
        producer_max_batch_size=PRODUCER_BATCH_BYTES,
        producer_max_request_size=4 * PRODUCER_BATCH_BYTES,
        producer_linger_ms=PRODUCER_LINGER_MS,
        **faust_credentials(settings.security),
    )
    topics = settings.topics

    def raw_topic(name: str) -> Any:
        """A topic of raw bytes keys and values (gangstate decodes and validates them itself,
        so a malformed value reaches the dead-letter path instead of a Faust codec error)."""
        return app.topic(name, key_type=bytes, value_type=bytes, key_serializer="raw",
                         value_serializer="raw", partitions=settings.partitions)

    gang_events = raw_topic(topics.gang_events)
    app.batch_topic(gang_events, max_buffered=BUFFERED)
    diagnostics = raw_topic(topics.diagnostics)
    commands = raw_topic(topics.commands)
    dead_letters = raw_topic(topics.dead_letters)

    gangs = app.tables.add(GangTable(
        app, name="gangs", default=None, beacon=app.tables.beacon,
        partitions=settings.partitions, key_type=bytes, value_type=bytes,
        help="gang id -> gang state (streams.core.state wire form)"))
    store = TableStore(gangs, settings.fold)
    metrics = WorkerMetrics()
    folds: dict[int, PartitionFold] = {}
    max_skew = settings.max_skew_micros
    owner_of = functools.lru_cache(maxsize=OWNER_CACHE)(
        functools.partial(partition_of, partitions=settings.partitions))
    rekeyed: list[tuple[bytes, bytes, int]] = []

    def letter_for(message: Any, error: str) -> tuple[Any, bytes | None, bytes]:
        """The ``(topic, key, value)`` send of the dead letter of ``message`` for ``error``."""
        return (dead_letters, message.key, _json(dead_letter(
            message.topic, message.partition, message.offset, message.key, message.value,
            error)))

    def fold_for(partition: int) -> PartitionFold:
        fold = folds.get(partition)
        if fold is None:
            fold = PartitionFold(store, settings.fold, loopback=False,
                                 partition_of=partition_of)
            fold.rebuild_timers(store.timer_keys(partition))
            folds[partition] = fold
        return fold

    class _FlushBeforeCommit(faust.Sensor):
        """Writes the dirty gangs to the table and its changelog when Faust starts an offset
        commit (``Consumer.force_commit`` calls ``on_commit_initiated`` before it collects the
        offsets to commit and flushes the producer): a gang changed by many records between two
        commits is written once, and no committed offset is ahead of the changelog."""

        def on_commit_initiated(self, consumer: Any) -> Any:
            """Flush ``store`` (``TableStore.flush``) into the producer buffer. Raises
            ``RuntimeError`` (and so stops the commit) when Faust's producer buffer has
            crashed: a message it dropped would otherwise be behind a committed offset."""
            buffer = getattr(app.producer, "buffer", None)
            if buffer is not None and buffer.crashed:
                raise RuntimeError(f"not committing: the producer buffer crashed "
                                   f"({buffer.crash_reason!r})")
            store.flush()
            return None

    app.sensors.add(_FlushBeforeCommit())

    @app.on_partitions_revoked.connect
    async def forget_on_revoke(app: Any, revoked: Any, **kwargs: Any) -> None:
        """A rebalance may move partitions away and back: write what is dirty, then drop the
        decoded-state cache and the per-partition timer indexes, so both are rebuilt from the
        recovered table."""
        store.flush()
        store.cache.clear()
        folds.clear()

    @app.agent(gang_events, concurrency=1)
    async def fold_gang_events(stream: Any) -> Any:
        """Fold ``gang-events`` records in batches (concurrency 1, order kept) and send the
        batch's decisions; changed gangs are written when the offsets are committed
        (``_FlushBeforeCommit``). The records come through Faust's batch path
        (``PatchedApp.batches``, ``streams.worker.faust_patches``), not one Event at a time
        through ``stream``; the agent still owns the topic's subscription and is supervised,
        restarted and rebalanced by Faust."""
        observe_fold = metrics.fold_seconds.observe
        async for messages in app.batches(gang_events, BATCH):
            pending: list[tuple[Any, bytes | None, bytes]] = []
            for message in messages:
                try:
                    decoded = decode_input(message.value, kafka_time(message), max_skew)
                    outputs: list[Output] = []
                    key = decoded.key
                    if key is not None and decoded.record is not None:
                        owner = owner_of(key)
                        if message.partition != owner or message.key != key.encode("utf-8"):
                            # keyed elsewhere: fold it only where its gang lives
                            metrics.rekeyed()
                            rekeyed.append((key.encode("utf-8"), message.value, owner))
                            continue
                    if isinstance(decoded.record, RosterObserved) and (
                            decoded.record.partition != message.partition
                            or decoded.record.partitions != settings.partitions):
                        # it names the gangs of another partition (or topic size): applied
                        # here, it would change gangs this partition does not hold
                        raise DecodeError(
                            f"roster for partition {decoded.record.partition} of "
                            f"{decoded.record.partitions} read on partition "
                            f"{message.partition} of {settings.partitions}: not applied")
                    if decoded.record is not None:
                        store.partition = message.partition
                        # timed by hand: Histogram.time()'s context manager was 6 % of
                        # the worker's CPU at saturation (bench/profiles/worker.txt)
                        started = perf_counter()
                        outputs = fold_for(message.partition).feed(decoded.key,
                                                                   decoded.record)
                        observe_fold(perf_counter() - started)
                except DecodeError as err:
                    metrics.dead_lettered("invalid-record")
                    pending.append(letter_for(message, str(err)))
                    continue
                except Exception as err:  # a bug must not kill the worker or corrupt state
                    log.exception("internal error on %s[%s]@%s", message.topic,
                                  message.partition, message.offset)
                    metrics.dead_lettered("internal-error")
                    pending.append(letter_for(
                        message, f"internal error: {type(err).__name__}: {err}"))
                    continue
                metrics.folded(decoded, outputs)
                for out in outputs:
                    data = _json(out)
                    if len(data) > MAX_OUTPUT_BYTES:  # the broker would refuse it
                        log.error("%s of %d bytes from %s[%s]@%s not sent (over %d bytes)",
                                  out["schema"], len(data), message.topic, message.partition,
                                  message.offset, MAX_OUTPUT_BYTES)
                        metrics.dead_lettered("output-too-large")
                        pending.append(letter_for(
                            message, f"its {out['schema']} output of {len(data)} bytes is "
                                     f"over the {MAX_OUTPUT_BYTES}-byte bound: not sent"))
                    elif out["schema"] == COMMAND_SCHEMA:
                        pending.append((commands, output_key(out, "gang_group"), data))
                    elif out["schema"] == SUMMARY_SCHEMA:
                        pending.append((gang_events, output_key(out, "to"), data))
                    else:
                        pending.append((diagnostics, output_key(out, "gang"), data))
            # No await from here to the end of the batch: a shutdown cannot cut it in half.
            # Everything goes to Faust's producer buffer, which is flushed before the batch's
            # offsets are committed, so a committed record always has its outputs delivered;
            # the changed gangs join that buffer when the commit starts (_FlushBeforeCommit).
            for topic, key, value in pending:
                topic.send_soon(key=key, value=value)
            for key, value, owner in rekeyed:
                gang_events.send_soon(key=key, value=value, partition=owner)
            rekeyed.clear()

    def clock_of(key: str) -> int | None:
        """The event time gang ``key`` is read at: the clock of the fold of its partition
        (its latest record or tick), ``None`` before that partition folded anything here."""
        fold = folds.get(owner_of(key))
        return None if fold is None else fold.clock

    def heard() -> dict[str, int]:
        """The clusters whose watch producers' ticks this worker folded, each with its latest
        tick's event time (``PartitionFold.heard``, the latest over the partitions)."""
        merged: dict[str, int] = {}
        for fold in list(folds.values()):
            for cluster, at in fold.heard.items():
                if at > merged.get(cluster, -1):
                    merged[cluster] = at
        return merged

    if web_port is not None:
        from streams.worker import web as views

        views.register(app, store, settings, metrics=metrics, clock=clock_of, heard=heard)
    app.gangstate_store = store  # type: ignore[attr-defined]
    app.gangstate_metrics = metrics  # type: ignore[attr-defined]
    return app


GC_YOUNG_THRESHOLD = 50_000
"""Allocations between two collections of Python's youngest GC generation in the worker (the
default is 700). The fold allocates a few short-lived containers per record, and its gang
states (slotted dataclasses, copied per change and never changed once handed out) hold no
reference cycles, so reference counting frees them: at 700,
cyclic collections took about 10 % of the fold's and 7 % of decoding's CPU time
(docs/benchmarks.md, "Garbage collection"). Cyclic garbage is still collected, later."""


def tune_gc() -> None:
    """Set the worker's GC thresholds (``GC_YOUNG_THRESHOLD``; the older generations keep the
    default of 10). Called by ``run_worker`` before the app starts, and by the bench."""
    gc.set_threshold(GC_YOUNG_THRESHOLD, 10, 10)


def start_line(settings: Settings, web_port: int | None, web_bind: str) -> str:
    """The one line ``gangstate worker`` writes to stderr once Kafka answered and its topics
    exist, before it joins its consumer group, e.g. ``gangstate worker: folding
    gangstate.gang-events at 127.0.0.1:9092 (consumer group gangstate) into
    gangstate.diagnostics and gangstate.commands; views and /metrics on
    http://127.0.0.1:6067 (/readyz: 200 once its partitions are assigned)``."""
    t = settings.topics
    where = (f"views and /metrics on http://{web_bind}:{web_port} (/readyz: 200 once its "
             f"partitions are assigned)") if web_port else "no views (--http-port N serves them)"
    return (f"gangstate worker: folding {t.gang_events} at {settings.bootstrap} (consumer group "
            f"{settings.app_id}) into {t.diagnostics} and {t.commands}; {where}")


def shared_state_warning(settings: Settings) -> str | None:
    """The line ``gangstate worker`` writes (after its start line) when its topics have a
    prefix of their own but its app id is the default: the gang table's changelog
    (``<app id>-gangs-changelog``) and the consumer group are named by the app id alone, so
    such a worker shares its state with every other worker of the default app id, whatever
    their topics (a new user's worker on ``nu2.`` showed another cluster's gangs). ``None``
    when the prefix is the default or the app id was chosen."""
    own = own_app_id(settings)
    if own is None:
        return None
    return (f"gangstate worker: warning: topic prefix {settings.topics.prefix!r} with the "
            f"default app id {settings.app_id!r}: the gang table (changelog "
            f"{settings.app_id}-gangs-changelog) and the consumer group are those of every "
            f"worker of app id {settings.app_id!r}, whatever its topics; set GANGSTATE_APP_ID "
            f"(e.g. GANGSTATE_APP_ID={own}) to keep this worker's state apart")


def run_worker(settings: Settings, *, web_port: int | None = None, web_bind: str = "127.0.0.1",
               web_host: str | None = None, loglevel: str = "warning",
               source: str = "KAFKA_BOOTSTRAP_SERVERS") -> int:
    """Run the worker in the foreground until SIGINT/SIGTERM (``gangstate worker``); the
    ``web_*`` arguments as ``create_app``'s; returns the exit status (0 when stopped by a
    signal, at any moment).

    Before Faust starts it waits for Kafka and creates the topics
    (``streams.kafka.waiting.wait_for_kafka``, retried with backoff, one log line per 10 s at
    most; ``source`` names where the address came from, for that line); meanwhile
    ``/readyz`` on ``web_port`` answers 503 with the reason (``/metrics``: an empty registry, so
    that a liveness probe passes). Then Faust's web server takes the port over (``streams.worker.web``; a second or
    so without an answer in between)."""
    from prometheus_client import CollectorRegistry

    from streams.kafka.logs import limited_handler
    from streams.kafka.publishing import ensure_topics
    from streams.kafka.waiting import Readiness
    from streams.runner import Component

    component = Component("gangstate worker",
                          Readiness(f"waiting for Kafka at {settings.bootstrap} ({source})"))
    # /metrics answers (empty) so that a liveness probe on it passes while the worker waits;
    # /readyz says 503 and why
    component.serve(web_port, web_bind, CollectorRegistry())
    component.handle_signals()
    handler = limited_handler()  # the waiting lines, before Faust sets up logging
    handler.setFormatter(logging.Formatter("[%(asctime)s] [%(process)d] [%(levelname)s] "
                                           "%(message)s"))
    waiting_log = logging.getLogger("gangstate")
    waiting_log.addHandler(handler)
    try:
        component.wait_for_kafka(settings, source, then=lambda: ensure_topics(settings))
    finally:
        waiting_log.removeHandler(handler)
        component.restore_signals()  # Faust's worker handles them from here on
        component.stop_serving()  # and its web server takes the port over
    if component.stop.is_set():
        return 0
    try:
        return _run_faust(settings, web_port, web_bind, web_host, loglevel)
    except KeyboardInterrupt:  # Ctrl-C before Faust's own handlers are in place: a stop too
        print("gangstate worker: stopped while starting", file=sys.stderr, flush=True)
        return 0


def _run_faust(settings: Settings, web_port: int | None, web_bind: str, web_host: str | None,
               loglevel: str) -> int:
    """``run_worker`` once Kafka answered: the start line, then Faust's worker until a
    signal (0)."""
    from streams.kafka.logs import quiet_coordinator_start
    from streams.kafka.waiting import quiet_libraries

    print(start_line(settings, web_port, web_bind), file=sys.stderr, flush=True)
    warning = shared_state_warning(settings)
    if warning is not None:
        print(warning, file=sys.stderr, flush=True)
    tune_gc()
    app = create_app(settings, web_port=web_port, web_bind=web_bind, web_host=web_host)
    level = logging.getLevelName(loglevel.upper())
    if isinstance(level, int):
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(level)
    quiet_libraries()  # kafka-python (the topics' creation) says nothing the worker does not
    quiet_coordinator_start()  # a new broker's coordinator comes within seconds: no ERROR
    worker = RateLimitedWorker(app, loglevel=loglevel, quiet=True)
    worker.execute_from_commandline()  # raises SystemExit: 0 once stopped by a signal
    return 0
