"""The gang table: each gang's state in a Faust table, its changelog, and its bulk recovery.

Where it sits: inside the worker (``streams.worker.app`` wires it). ``TableStore`` shows the Faust
table to the core's ``PartitionFold`` as ``gang id -> GangState``, caches decoded states and
writes each changed gang once per offset commit; ``GangTable`` is the Faust table whose store,
``BulkRecoveryStore``, loads its changelog partitions in bulk on every assignment;
``encode_state`` is the stored value (the wire form with a timer flag in front, ``NO_TIMER``).

Must not: decide anything about gangs. It deletes a gang only when the core's fold does
(``del store[key]``: the gang is gone, ``streams.core.retention``), with a changelog tombstone.
"""

from __future__ import annotations

import itertools
import json
import logging
from time import monotonic as time_monotonic
from typing import Any, Iterator, MutableMapping

import faust
from pydantic_core import to_json
from faust.stores.memory import Store as MemoryStore
from faust.types import TP

from streams.core.fold import FoldSettings, next_due
from streams.core.retention import gone_at
from streams.core.state import GangState, from_wire, to_wire

log = logging.getLogger("gangstate.worker")


CACHE_GANGS = 50_000
"""Decoded gang states kept in memory at most; beyond it the least recently written clean ones
are dropped (their stored bytes stay; the next record of such a gang decodes it again)."""


LOAD_FETCH_BYTES = 16 * 1024 * 1024
"""Bytes per partition per fetch when the table loads its changelog (``BulkRecoveryStore``)."""


NO_TIMER = b'{"tm":0,'
"""How a stored gang value starts when the gang had no pending timer when it was written (and
was not waiting to be removed: ``streams.core.retention.gone_at``)."""


def encode_state(state: GangState, has_timer: bool) -> bytes:
    """The table value of a gang: the JSON of ``to_wire(state)`` with one more member in front,
    ``"tm"`` (1 when the gang has a pending timer, i.e. ``next_due`` is not ``None``, or will be
    removed once gone, ``retention.gone_at`` is not ``None``; else 0).

    ``from_wire`` ignores the extra member, so readers of the changelog see the wire form. The
    worker uses it after a restart: a value that starts with ``NO_TIMER`` has no timer, so
    rebuilding the timer index does not decode it (whether a gang has a timer depends on its
    state only; the fold settings move the due time, not its existence)."""
    data = {"tm": int(has_timer), **to_wire(state)}
    return to_json(data)  # compact UTF-8 JSON, as json.dumps(separators=(",", ":")), ~2x faster


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

    def remove(self, key: bytes) -> None:
        """Forget ``key`` (no error when absent)."""
        self.data.pop(key, None)
        self._key_partition.pop(key, None)

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
        from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

        self.data.clear()
        self._key_partition.clear()
        if not tps:
            return {}
        servers = [f"{url.host}:{url.port or 9092}" for url in self.app.conf.broker]
        consumer = AIOKafkaConsumer(
            bootstrap_servers=servers, group_id=None, enable_auto_commit=False,
            auto_offset_reset="earliest", client_id=f"{self.app.conf.id}-table-loader",
            max_partition_fetch_bytes=LOAD_FETCH_BYTES, fetch_max_bytes=LOAD_FETCH_BYTES * 4,
            # TLS and SASL as the app's own clients (Settings.security -> Faust credentials)
            **credentials_to_aiokafka_auth(self.app.conf.broker_credentials,
                                           self.app.conf.ssl_context))
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
                            key = legacy_key(key)
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


def legacy_key(key: bytes) -> bytes:
    """The gang id of a table key written by Faust's JSON key serializer (``b'"ns/name"'``)."""
    try:
        decoded = json.loads(key)
    except ValueError:
        return key
    return decoded.encode("utf-8") if isinstance(decoded, str) else key


class GangTable(faust.Table):
    """``faust.Table`` whose store is a ``BulkRecoveryStore``."""

    def _new_store(self) -> Any:
        return BulkRecoveryStore("memory://", self.app, self, table_name=self.name,
                                 key_type=self.key_type, key_serializer=self.key_serializer,
                                 value_serializer=self.value_serializer,
                                 value_type=self.value_type, loop=self.loop,
                                 options=self.options)


class TableStore(MutableMapping[str, GangState]):
    """The gang table seen as ``gang id -> GangState`` for the core's ``PartitionFold``.

    The Faust table (a ``GangTable``: raw bytes keys and values, so its changelog holds the
    UTF-8 gang id and the JSON bytes) holds each gang's compact wire form
    (``streams.core.state.to_wire``, stored by ``encode_state``); decoded states are cached per
    key, so a gang is decoded once, not on every record. Writes are batched: ``__setitem__``
    only updates the cache and marks the key dirty with the partition being processed
    (``partition``); ``flush()`` then writes each dirty gang once to the table and its
    changelog, in that partition (the changelog stays co-partitioned with ``gang-events``).
    ``del store[key]`` (the fold removes a gone gang) is written the same way: the key leaves
    the table and its changelog gets a tombstone (a null value). The worker flushes when Faust
    starts an offset commit, before it flushes its producer and
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
        self.deleted: set[str] = set()
        self.partition: int | None = None
        self.cache_gangs = cache_gangs

    def __getitem__(self, key: str) -> GangState:
        state = self.cache.get(key)
        if state is None:
            if key in self.deleted:
                raise KeyError(key)
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
        self.deleted.discard(key)

    def __delitem__(self, key: str) -> None:
        """Remove a gone gang: out of the cache now, out of the table and into its changelog
        as a tombstone at the next ``flush``. Raises ``KeyError`` when absent."""
        if self.partition is None:
            raise RuntimeError("TableStore.partition must name the partition being processed")
        if key not in self:
            raise KeyError(key)
        self.cache.pop(key, None)
        self.dirty[key] = self.partition
        self.deleted.add(key)

    def _stored(self) -> set[str]:
        return {k.decode("utf-8") for k in self.table.data.keys()} - self.deleted

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._stored() | (set(self.dirty) - self.deleted)))

    def __len__(self) -> int:
        return len(self._stored() | (set(self.dirty) - self.deleted))

    def timer_keys(self, partition: int) -> list[str]:
        """Gang ids of ``partition`` whose state may have a pending timer: every stored value
        not written with ``NO_TIMER`` in front (e.g. by an older worker), and the dirty ones."""
        out = {k for k, p in self.dirty.items() if p == partition}
        for key, raw in self.table.data.partition_items(partition):
            if not raw.startswith(NO_TIMER):
                out.add(key.decode("utf-8"))
        return sorted(out - self.deleted)

    def flush(self) -> int:
        """Write every dirty gang once to the table and its changelog; returns how many. Then,
        when more than ``cache_gangs`` states are decoded, drop the oldest written ones
        (insertion order) down to 90 % of it."""
        dirty, self.dirty = self.dirty, {}
        deleted, self.deleted = self.deleted, set()
        settings = self.fold_settings
        window = settings.tombstone_micros
        data = self.table.data
        cache = self.cache
        for key, partition in dirty.items():
            k = key.encode("utf-8")
            if key in deleted:
                data.remove(k)
                self.table.send_changelog(partition, k, None)
                continue
            state = cache.pop(key)
            cache[key] = state  # most recently written last: the last to be dropped
            raw = encode_state(state, next_due(state, settings) is not None
                               or gone_at(state, window) is not None)
            data.put(k, raw, partition)
            self.table.send_changelog(partition, k, raw)
        if len(cache) > self.cache_gangs:  # every cached state is clean at this point
            excess = len(cache) - int(self.cache_gangs * 0.9)
            for key in list(itertools.islice(cache, excess)):
                del cache[key]
        return len(dirty)
