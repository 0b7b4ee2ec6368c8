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

Must not: decide anything about gangs (that is ``streams.core``), or read the wall clock for
anything but dead letters' ``observed_at``.
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
import os
from pathlib import Path
from time import monotonic as time_monotonic
from datetime import datetime, timezone
from typing import Any, Iterator, MutableMapping

import faust
from faust.stores.memory import Store as MemoryStore
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from mode.utils.objects import cached_property
from mode.utils.queues import FlowControlEvent

from streams.kafka.settings import Settings
from streams.wire.contracts import DEAD_LETTER_SCHEMA, SUMMARY_SCHEMA
from streams.core.fold import FoldSettings, Output, PartitionFold, next_due
from streams.core.state import GangState, from_wire, to_wire
from streams.wire.decoding import DecodeError, decode_input
from streams.worker.metrics import WorkerMetrics

log = logging.getLogger("gangstate.worker")


BATCH = 500
"""Records folded per batch at most; each changed gang is written once per batch."""
BATCH_SECONDS = 0.01
"""How long a batch waits to fill before it is folded anyway, seconds (adds at most this much
latency to a decision)."""
PRODUCER_BATCH_BYTES = 1024 * 1024
"""Bytes of one partition's batch in the producer (Faust's default: 16 KiB)."""
PRODUCER_LINGER_MS = 2
"""How long the producer waits for more messages before it sends a batch, ms."""
CACHE_GANGS = 50_000
"""Decoded gang states kept in memory at most; beyond it the least recently written clean ones
are dropped (their stored bytes stay; the next record of such a gang decodes it again)."""
QUIET_LOGGERS = ("aiokafka", "kafka", "faust", "mode")
"""Libraries whose DEBUG/INFO records the worker never builds: aiokafka alone creates one log
record per message produced (filtered out later by the handler, but built: ~2 % of the worker's
time at saturation, bench/profiles/worker.txt)."""
FETCH_MAX_WAIT_MS = 100
"""Longest a fetch waits at the broker for new data, ms (Faust's own consumer: 1500)."""
LOAD_FETCH_BYTES = 16 * 1024 * 1024
"""Bytes per partition per fetch when the table loads its changelog (``BulkRecoveryStore``)."""


NO_TIMER = b'{"tm":0,'
"""How a stored gang value starts when the gang had no pending timer when it was written."""


def encode_state(state: GangState, has_timer: bool) -> bytes:
    """The table value of a gang: the JSON of ``to_wire(state)`` with one more member in front,
    ``"tm"`` (1 when the gang has a pending timer, i.e. ``next_due`` is not ``None``; else 0).

    ``from_wire`` ignores the extra member, so readers of the changelog see the wire form. The
    worker uses it after a restart: a value that starts with ``NO_TIMER`` has no timer, so
    rebuilding the timer index does not decode it (whether a gang has a timer depends on its
    state only; the fold settings move the due time, not its existence)."""
    data = {"tm": int(has_timer), **to_wire(state)}
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class BulkRecoveryStore(MemoryStore):
    """Faust's memory store that recovers its table itself, in bulk, before Faust's recovery.

    Faust recovers a table by passing every changelog record through its consumer, conductor,
    changelog queue and recovery loop, one record at a time (several tasks and queue hand-offs
    per record): about 1.5k records/s here, so a 100k-gang changelog took over a minute, while
    a plain consumer reads the same 600 MiB in 3 s. On every rebalance this store reads its
    active changelog partitions itself (a separate aiokafka consumer without a group, from the
    beginning to the end offsets taken when it starts) straight into the table's dict, and
    reports the last offset it read as the persisted offset (what a RocksDB store reports):
    Faust's recovery then only reads what was written after that, if anything. Standby
    partitions are left to Faust (the memory store keeps no standby data anyway).

    Keys written by Faust's JSON key serializer (before the table stored raw bytes:
    ``b'"ns/name"'``, quotes included) are loaded as the gang id; a later record of the gang
    under its raw key (same partition, higher offset) replaces it.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self._loaded: dict[TP, int] = {}

    def persisted_offset(self, tp: TP) -> int | None:
        """The offset of the last changelog record loaded for ``tp`` (``None``: none)."""
        return self._loaded.get(tp)

    def put(self, key: bytes, value: bytes, partition: int) -> None:
        """Store ``value`` under ``key``, remembering its changelog partition."""
        self.data[key] = value
        self._key_partition[key] = partition

    def partition_items(self, partition: int) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` of the gangs stored in changelog ``partition``."""
        data = self.data
        for key, p in list(self._key_partition.items()):
            if p == partition:
                value = data.get(key)
                if value is not None:
                    yield key, value

    async def on_rebalance(self, assigned: Any, revoked: Any, newly_assigned: Any,
                           generation_id: int = 0) -> None:
        """Reload the table from its active changelog partitions (from scratch: Faust
        flushed the producer when the previous assignment was revoked)."""
        changelog = self.table.changelog_topic.get_topic_name()
        actives = {tp for tp in self.app.assignor.assigned_actives() if tp.topic == changelog}
        started = time_monotonic()
        self._loaded = await self._load(sorted(actives))
        log.info("loaded %d gangs from %d changelog partitions in %.1f s", len(self.data),
                 len(actives), time_monotonic() - started)

    async def _load(self, tps: list[TP]) -> dict[TP, int]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        self.data.clear()
        self._key_partition.clear()
        if not tps:
            return {}
        servers = [f"{url.host}:{url.port or 9092}" for url in self.app.conf.broker]
        consumer = AIOKafkaConsumer(
            bootstrap_servers=servers, group_id=None, enable_auto_commit=False,
            auto_offset_reset="earliest", client_id=f"{self.app.conf.id}-table-loader",
            max_partition_fetch_bytes=LOAD_FETCH_BYTES, fetch_max_bytes=LOAD_FETCH_BYTES * 4)
        await consumer.start()
        try:
            parts = [TopicPartition(tp.topic, tp.partition) for tp in tps]
            consumer.assign(parts)
            end = await consumer.end_offsets(parts)
            await consumer.seek_to_beginning(*parts)
            todo = set()
            for tp in parts:
                if await consumer.position(tp) < end[tp]:
                    todo.add(tp)
            data = self.data
            key_partition = self._key_partition
            while todo:
                batch = await consumer.getmany(*todo, timeout_ms=1000)
                for tp, records in batch.items():
                    last = end[tp]
                    for record in records:
                        if record.offset >= last:
                            break  # written after the load began: Faust's recovery reads it
                        key = record.key
                        if key is None:
                            continue
                        if key[:1] == b'"':
                            key = _legacy_key(key)
                        if record.value is None:
                            data.pop(key, None)
                            key_partition.pop(key, None)
                        else:
                            data[key] = record.value
                            key_partition[key] = tp.partition
                for tp in list(todo):
                    if await consumer.position(tp) >= end[tp]:
                        todo.discard(tp)
        finally:
            await consumer.stop()
        return {TP(tp.topic, tp.partition): end[tp] - 1 for tp in parts if end[tp] > 0}


def _legacy_key(key: bytes) -> bytes:
    """The gang id of a table key written by Faust's JSON key serializer (``b'"ns/name"'``)."""
    try:
        decoded = json.loads(key)
    except ValueError:
        return key
    return decoded.encode("utf-8") if isinstance(decoded, str) else key


class _GangTable(faust.Table):
    """``faust.Table`` whose store is a ``BulkRecoveryStore``."""

    def _new_store(self) -> Any:
        return BulkRecoveryStore("memory://", self.app, self, table_name=self.name,
                                 key_type=self.key_type, key_serializer=self.key_serializer,
                                 value_serializer=self.value_serializer,
                                 value_type=self.value_type, loop=self.loop,
                                 options=self.options)


class TableStore(MutableMapping[str, GangState]):
    """The gang table seen as ``gang id -> GangState`` for the core's ``PartitionFold``.

    The Faust table (a ``_GangTable``: raw bytes keys and values, so its changelog holds the
    UTF-8 gang id and the JSON bytes) holds each gang's compact wire form
    (``streams.core.state.to_wire``, stored by ``encode_state``); decoded states are cached per
    key, so a gang is decoded once, not on every record. Writes are batched: ``__setitem__``
    only updates the cache and marks the key dirty with the partition being processed
    (``partition``); ``flush()`` then writes each dirty gang once to the table and its
    changelog, in that partition (the changelog stays co-partitioned with ``gang-events``). The
    worker flushes when Faust starts an offset commit, before it flushes its producer and
    commits, and before partitions are revoked. At most ``cache_gangs`` decoded states are
    kept (``flush`` drops the oldest written ones). ``timer_keys(partition)`` lists the gangs of a
    partition that may have a pending timer, without decoding the others.
    """

    def __init__(self, table: Any, fold_settings: FoldSettings,
                 cache_gangs: int = CACHE_GANGS) -> None:
        self.table = table
        self.fold_settings = fold_settings
        self.cache: dict[str, GangState] = {}
        self.dirty: dict[str, int] = {}
        self.partition: int | None = None
        self.cache_gangs = cache_gangs

    def __getitem__(self, key: str) -> GangState:
        state = self.cache.get(key)
        if state is None:
            raw = self.table.data.get(key.encode("utf-8"))
            if raw is None:
                raise KeyError(key)
            state = from_wire(json.loads(raw))
            self.cache[key] = state
        return state

    def __setitem__(self, key: str, state: GangState) -> None:
        if self.partition is None:
            raise RuntimeError("TableStore.partition must name the partition being processed")
        self.cache[key] = state
        self.dirty[key] = self.partition

    def __delitem__(self, key: str) -> None:
        raise NotImplementedError("gang states are never deleted (the epoch is kept)")

    def _stored(self) -> set[str]:
        return {k.decode("utf-8") for k in self.table.data.keys()}

    def __iter__(self) -> Iterator[str]:
        stored = self._stored()
        return iter(sorted(stored | set(self.dirty)))

    def __len__(self) -> int:
        return len(self._stored() | set(self.dirty))

    def timer_keys(self, partition: int) -> list[str]:
        """Gang ids of ``partition`` whose state may have a pending timer: every stored value
        not written with ``NO_TIMER`` in front (e.g. by an older worker), and the dirty ones."""
        out = {k for k, p in self.dirty.items() if p == partition}
        for key, raw in self.table.data.partition_items(partition):
            if not raw.startswith(NO_TIMER):
                out.add(key.decode("utf-8"))
        return sorted(out)

    def flush(self) -> int:
        """Write every dirty gang once to the table and its changelog; returns how many. Then,
        when more than ``cache_gangs`` states are decoded, drop the oldest written ones
        (insertion order) down to 90 % of it."""
        dirty, self.dirty = self.dirty, {}
        settings = self.fold_settings
        data = self.table.data
        cache = self.cache
        for key, partition in dirty.items():
            state = cache.pop(key)
            cache[key] = state  # most recently written last: the last to be dropped
            raw = encode_state(state, next_due(state, settings) is not None)
            k = key.encode("utf-8")
            data.put(k, raw, partition)
            self.table.send_changelog(partition, k, raw)
        if len(cache) > self.cache_gangs:  # every cached state is clean at this point
            excess = len(cache) - int(self.cache_gangs * 0.9)
            for key in list(itertools.islice(cache, excess)):
                del cache[key]
        return len(dirty)


class _FlowControl(FlowControlEvent):
    """Faust's flow control, except that ``resume()`` clears the stream buffers only when the
    flow was suspended.

    Faust clears every stream's input queue on ``resume()``. At the end of a table recovery
    (``Recovery.on_recovery_completed``) it resumes the stream partitions, waits for the seek to
    the committed offsets (broker round trips, during which the fetcher already hands records
    of those partitions to the agent's queue) and then calls ``resume()`` again although the
    flow is already running: the records queued in between are dropped. The consumer's
    position is already past them, so they are not fetched again; once a later record of the
    partition is committed they are lost for good, and a partition with nothing later (the
    recovery benchmark's single probe) gets no output at all. The buffers hold records of a
    previous assignment only after a suspension (a rebalance suspends the flow and clears them
    itself), so clearing on the suspended -> running transition only keeps Faust's guarantee
    and loses nothing.
    """

    def resume(self) -> None:
        """Resume the flow; clear the stream buffers only if it was suspended."""
        was_suspended = not self.is_active()
        self._suspend.clear()
        self._resume.set()
        if was_suspended:
            self.clear()


class _ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's aiokafka consumer with a shorter fetch long-poll (``FETCH_MAX_WAIT_MS``).

    Faust fixes ``fetch_max_wait_ms`` at 1500 ms. A fetch that finds no new data waits that long
    at the broker, and the other requests on the same connection (the end and start offsets
    that Faust's table recovery asks for) queue behind it: about 1.5 s each, twice per
    rebalance, 3 of the 8 s a worker took to serve again after recovering 100k gangs."""

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS  # read by consumer.start()
        return consumer


class _Consumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> Any:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class _Transport(faust_aiokafka.Transport):
    Consumer = _Consumer


class _App(faust.App):
    """``faust.App`` with ``_FlowControl`` (records fetched while a recovery ends are kept)
    and a ``_ConsumerThread`` (shorter fetch long-poll)."""

    @cached_property
    def flow_control(self) -> FlowControlEvent:
        """Flow control of streams (``_FlowControl``)."""
        return _FlowControl(loop=self.loop)

    def _new_transport(self) -> Any:
        url = self.conf.broker_consumer[0]
        if url.scheme not in ("kafka", "aiokafka"):
            return super()._new_transport()
        return _Transport(self.conf.broker_consumer, self)


def dead_letter(topic: str, partition: int | None, offset: int | None, key: bytes | None,
                value: bytes | None, error: str) -> dict[str, Any]:
    """Build a ``gangstate.dead-letter/v1`` record for a value that failed; ``observed_at`` is
    the wall clock (dead letters are not fold outputs)."""
    raw = value or b""
    try:
        text, encoding = raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(raw).decode("ascii"), "base64"
    return {
        "schema": DEAD_LETTER_SCHEMA,
        "observed_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "topic": topic, "partition": partition, "offset": offset,
        "key": None if key is None else key.decode("utf-8", "replace"),
        "value": text, "value_encoding": encoding, "error": error,
    }


def _json(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def create_app(settings: Settings, *, web_port: int | None = None,
               datadir: str | None = None) -> faust.App:
    """Build the Faust application for ``settings`` (nothing connects until it runs).

    ``datadir``: Faust's data folder (default ``GANGSTATE_DATA_DIR`` or
    ``~/.cache/gangstate/worker``). ``web_port``: serve gangstate's views (``streams.worker.web``) on
    127.0.0.1 at that port (Faust's built-in ``/table``, ``/router``, ``/graph`` and stats views
    stay off); ``None`` turns the web server off. ``app.gangstate_metrics`` is the app's
    ``WorkerMetrics``.
    Raises ``AssertionError`` when ``settings.bootstrap`` is unset.
    """
    assert settings.bootstrap, "KAFKA_BOOTSTRAP_SERVERS is not set"
    brokers = ";".join(f"kafka://{b.strip()}" for b in settings.bootstrap.split(","))
    app = _App(
        settings.app_id,
        broker=brokers,
        store="memory://",
        datadir=datadir or os.environ.get("GANGSTATE_DATA_DIR")
        or str(Path.home() / ".cache" / "gangstate" / "worker"),
        topic_partitions=settings.partitions,
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
        web_enabled=web_port is not None,
        web_bind="127.0.0.1",
        web_host="127.0.0.1",
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
    )
    topics = settings.topics

    def raw_topic(name: str) -> Any:
        """A topic of raw bytes keys and values (gangstate decodes and validates them itself,
        so a malformed value reaches the dead-letter path instead of a Faust codec error)."""
        return app.topic(name, key_type=bytes, value_type=bytes, key_serializer="raw",
                         value_serializer="raw", partitions=settings.partitions)

    gang_events = raw_topic(topics.gang_events)
    diagnostics = raw_topic(topics.diagnostics)
    commands = raw_topic(topics.commands)
    dead_letters = raw_topic(topics.dead_letters)

    gangs = app.tables.add(_GangTable(
        app, name="gangs", default=None, beacon=app.tables.beacon,
        partitions=settings.partitions, key_type=bytes, value_type=bytes,
        help="gang id -> gang state (streams.core.state wire form)"))
    store = TableStore(gangs, settings.fold)
    metrics = WorkerMetrics()
    folds: dict[int, PartitionFold] = {}

    def fold_for(partition: int) -> PartitionFold:
        fold = folds.get(partition)
        if fold is None:
            fold = PartitionFold(store, settings.fold, loopback=False)
            fold.rebuild_timers(store.timer_keys(partition))
            folds[partition] = fold
        return fold

    class _FlushBeforeCommit(faust.Sensor):
        """Writes the dirty gangs to the table and its changelog when Faust starts an offset
        commit (``Consumer.force_commit`` calls ``on_commit_initiated`` before it collects the
        offsets to commit and flushes the producer): a gang changed by many records between two
        commits is written once, and no committed offset is ahead of the changelog."""

        def on_commit_initiated(self, consumer: Any) -> Any:
            """Flush ``store`` (``TableStore.flush``) into the producer buffer."""
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
        (``_FlushBeforeCommit``)."""
        async for events in stream.take_events(BATCH, within=BATCH_SECONDS):
            pending: list[tuple[Any, bytes | None, bytes]] = []
            for event in events:
                message = event.message
                try:
                    decoded = decode_input(event.value)
                    outputs: list[Output] = []
                    if decoded.record is not None:
                        store.partition = message.partition
                        with metrics.fold_seconds.time():
                            outputs = fold_for(message.partition).feed(decoded.key,
                                                                       decoded.record)
                except DecodeError as err:
                    metrics.dead_lettered("invalid-record")
                    pending.append((dead_letters, event.key, _json(dead_letter(
                        message.topic, message.partition, message.offset, event.key,
                        event.value, str(err)))))
                    continue
                except Exception as err:  # a bug must not kill the worker or corrupt state
                    log.exception("internal error on %s[%s]@%s", message.topic,
                                  message.partition, message.offset)
                    metrics.dead_lettered("internal-error")
                    pending.append((dead_letters, event.key, _json(dead_letter(
                        message.topic, message.partition, message.offset, event.key,
                        event.value, f"internal error: {type(err).__name__}: {err}"))))
                    continue
                metrics.folded(decoded, outputs)
                for out in outputs:
                    if out["schema"] == "gangstate.command/v1":
                        pending.append((commands, out["gang_group"].encode(), _json(out)))
                    elif out["schema"] == SUMMARY_SCHEMA:
                        pending.append((gang_events, out["to"].encode(), _json(out)))
                    else:
                        pending.append((diagnostics, out["gang"].encode(), _json(out)))
            # No await from here to the end of the batch: a shutdown cannot cut it in half.
            # Everything goes to Faust's producer buffer, which is flushed before the batch's
            # offsets are committed, so a committed record always has its outputs delivered;
            # the changed gangs join that buffer when the commit starts (_FlushBeforeCommit).
            for topic, key, value in pending:
                topic.send_soon(key=key, value=value)

    if web_port is not None:
        from streams.worker import web as views

        views.register(app, store, settings, metrics=metrics)
    app.gangstate_store = store  # type: ignore[attr-defined]
    app.gangstate_metrics = metrics  # type: ignore[attr-defined]
    return app


def run_worker(settings: Settings, *, web_port: int | None = None, loglevel: str = "warning"
               ) -> None:
    """Run the worker in the foreground until SIGINT/SIGTERM (``gangstate worker``)."""
    from streams.kafka.publishing import ensure_topics

    ensure_topics(settings)
    app = create_app(settings, web_port=web_port)
    level = logging.getLevelName(loglevel.upper())
    if isinstance(level, int):
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(level)
    worker = faust.Worker(app, loglevel=loglevel, quiet=True)
    worker.execute_from_commandline()
