"""Kafka-side helpers of the benchmarks (bench only): probe keys, a watcher process that timestamps
probe outputs as they become readable, preloading, the bare-consumer limit, process memory.

Times are ``time.monotonic()`` (CLOCK_MONOTONIC: one clock for every process of the machine), so
the watcher process and the producing process compare directly.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import queue
import time
import uuid
from typing import Iterable

from streams.kafka.partitions import partition_of
from streams.settings import Settings, Topics

PARTITIONS = 8
"""Partitions of the benchmark's gang-events topic."""

PROBE_NS = "probe"


def probe_gangs(partitions: int, per_partition: int, tag: str) -> list[list[str]]:
    """Probe gang ids (``probe/<tag>-<n>``), ``per_partition`` for each partition, so that every
    partition of ``gang-events`` carries probes."""
    out: list[list[str]] = [[] for _ in range(partitions)]
    n = 0
    while any(len(g) < per_partition for g in out):
        gang = f"{PROBE_NS}/{tag}-{n}"
        p = partition_of(gang, partitions)
        if len(out[p]) < per_partition:
            out[p].append(gang)
        n += 1
    return out


def _watch(bootstrap: str, topics: list[str], partitions: int, q: mp.Queue,
           stop: mp.Event) -> None:  # runs in its own process
    """The watcher's loop: an aiokafka consumer (assigned, no group, fetch long-poll 5 ms:
    kafka-python's consumer added tens to hundreds of ms here, docs/benchmarks.md)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from synthetic import PROBE_MODE, probe_number

    PROBE_MARK = PROBE_MODE.encode()  # only a probe's answer holds it (its facts.value)

    async def run() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                    enable_auto_commit=False, fetch_max_wait_ms=5,
                                    max_partition_fetch_bytes=4 * 1024 * 1024,
                                    auto_offset_reset="earliest")
        await consumer.start()
        tps = [TopicPartition(t, p) for t in topics for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        for tp in tps:
            await consumer.position(tp)
        q.put(("ready", time.monotonic()))
        count = 0
        last_count_sent = time.monotonic()
        try:
            while not stop.is_set():
                polled = await consumer.getmany(timeout_ms=20, max_records=20_000)
                now = time.monotonic()
                found = []
                for msgs in polled.values():
                    count += len(msgs)
                    for m in msgs:
                        if PROBE_MARK in m.value:
                            d = json.loads(m.value)
                            n = probe_number(d)
                            if n is not None:
                                found.append((d["gang"], n, now))
                if found:
                    q.put(("probes", found))
                if now - last_count_sent > 0.5:
                    q.put(("count", count, now))
                    last_count_sent = now
            q.put(("count", count, time.monotonic()))
        finally:
            await consumer.stop()

    asyncio.run(run())


class Watcher:
    """A child process reading ``topics`` from the beginning and timestamping probe outputs
    (``GangSpecInvalid`` of a probe's mode, ``synthetic.probe_number``) when they become
    readable; ``seen`` maps ``(gang, n)`` to that time."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int) -> None:
        ctx = mp.get_context("spawn")
        self.q: mp.Queue = ctx.Queue()
        self.stop_event = ctx.Event()
        self.proc = ctx.Process(target=_watch, args=(bootstrap, topics, partitions, self.q,
                                                     self.stop_event), daemon=True)
        self.seen: dict[tuple[str, int], float] = {}
        self.outputs = 0

    def start(self, timeout: float = 60) -> None:
        self.proc.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.q.get(timeout=1)
            except queue.Empty:
                continue
            if msg[0] == "ready":
                return
        raise RuntimeError("watcher did not start")

    def drain(self, block: float = 0.0) -> None:
        try:
            msg = self.q.get(timeout=block) if block else self.q.get_nowait()
            while True:
                if msg[0] == "probes":
                    for gang, cycle, t in msg[1]:
                        self.seen.setdefault((gang, cycle), t)
                elif msg[0] == "count":
                    self.outputs = msg[1]
                msg = self.q.get_nowait()
        except queue.Empty:
            pass

    def wait_for(self, keys: Iterable[tuple[str, int]], timeout: float,
                 alive=lambda: True) -> bool:
        keys = list(keys)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and alive():
            self.drain(block=0.2)
            if all(k in self.seen for k in keys):
                return True
        self.drain()
        return all(k in self.seen for k in keys)

    def stop(self) -> None:
        self.stop_event.set()
        self.proc.join(timeout=10)
        self.drain()
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join()


def bare_consumer(bootstrap: str, topic: str, partitions: int, expected: int) -> dict:
    """The limit: a bare aiokafka consumer reading ``topic`` from the beginning and calling
    ``json.loads`` on every value; records/s over ``expected`` records."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> dict:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            n = 0
            nbytes = 0
            t0, c0 = time.perf_counter(), time.process_time()
            while n < expected:
                batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
                for msgs in batch.values():
                    for m in msgs:
                        json.loads(m.value)
                        nbytes += len(m.value)
                    n += len(msgs)
                if time.perf_counter() - t0 > 600:
                    break
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            return {"records": n, "seconds": round(dt, 3), "records_per_s": round(n / dt),
                    "mib_per_s": round(nbytes / dt / 2**20, 1), "cpu_seconds": round(cpu, 2),
                    "cpu_records_per_s": round(n / max(cpu, 1e-9))}
        finally:
            await consumer.stop()

    return asyncio.run(run())


def proc_memory(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak RSS) of a process, in bytes (Linux ``/proc``)."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                name, value, _unit = line.split()
                out[name[:-1]] = int(value) * 1024
    return out


def create_compacted_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Create a compacted topic (as Faust creates a table's changelog)."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="gangstate-bench")
    try:
        admin.create_topics([NewTopic(name, partitions, 1,
                                      topic_configs={"cleanup.policy": "compact"})])
    finally:
        admin.close()


def produce(bootstrap: str, records: Iterable[tuple[str, bytes, bytes, int]]) -> int:
    """Write ``(topic, key, value, partition)`` records with aiokafka (the client the worker
    itself writes with; much faster than kafka-python for large values), acks=1, batches up
    to 1 MB; returns the number of records written."""
    from aiokafka import AIOKafkaProducer

    async def run() -> int:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=50,
                                    max_batch_size=1_000_000, max_request_size=1_048_576)
        await producer.start()
        n = 0
        pending: list[asyncio.Future] = []
        try:
            for topic, key, value, partition in records:
                pending.append(await producer.send(topic, value=value, key=key,
                                                   partition=partition))
                n += 1
                if len(pending) >= 5_000:
                    await asyncio.gather(*pending)
                    pending.clear()
            await asyncio.gather(*pending)
        finally:
            await producer.stop()
        return n

    return asyncio.run(run())


def make_settings(bootstrap: str, tag: str) -> Settings:
    run = f"{tag}-{uuid.uuid4().hex[:8]}"
    return Settings(bootstrap=bootstrap, topics=Topics(f"bench-{run}."), partitions=PARTITIONS,
                    app_id=f"gangstate-bench-{run}")


def preload(settings: Settings, items: list[tuple[str, bytes]]) -> dict:
    """Write ``items`` (``(gang id, value)``) into ``gang-events``, each in its key's partition
    (``partition_of``, the partitioner of ``Publisher``), with aiokafka (``produce``: several
    times faster than the kafka-python ``Publisher`` here); returns records, seconds, rate."""
    topic = settings.topics.gang_events
    n = settings.partitions
    t = time.perf_counter()
    produce(settings.bootstrap or "", ((topic, key.encode(), value, partition_of(key, n))
                                       for key, value in items))
    dt = time.perf_counter() - t
    return {"records": len(items), "seconds": round(dt, 2),
            "records_per_s": round(len(items) / dt)}


def bare_latency(bootstrap: str, topic: str, partitions: int, rate: int, seconds: float,
                 values: list[bytes]) -> dict:
    """The honest floor: a bare aiokafka producer (acks=all) and consumer (assigned, no group,
    ``fetch_max_wait_ms`` 5) in one asyncio process on the same broker; ``rate`` records/s of
    ``values`` (cycled) for ``seconds``, a probe about every 20 ms; latency = probe ``send()``
    call -> the consumer returns it (``time.monotonic``). Returns p50/p99/max in ms."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    from statistics import quantiles

    async def run() -> dict:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                    enable_auto_commit=False, fetch_max_wait_ms=5,
                                    auto_offset_reset="latest")
        await producer.start()
        await consumer.start()
        sent: dict[bytes, float] = {}
        seen: dict[bytes, float] = {}
        total = int(rate * seconds)
        every = max(1, rate // 50)
        done = asyncio.Event()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_end(*tps)
            for tp in tps:
                await consumer.position(tp)

            async def consume() -> None:
                while not done.is_set() or len(seen) < len(sent):
                    batch = await consumer.getmany(timeout_ms=50, max_records=10_000)
                    now = time.monotonic()
                    for msgs in batch.values():
                        for m in msgs:
                            if m.key is not None and m.key.startswith(b"probe-"):
                                seen.setdefault(m.key, now)
                    if done.is_set() and time.monotonic() - done_at[0] > 10:
                        break

            done_at = [0.0]
            reader = asyncio.create_task(consume())
            t0 = time.monotonic()
            i = 0
            while i < total:
                target = min(total, int((time.monotonic() - t0) * rate) + 1)
                if i >= target:
                    await asyncio.sleep(0.0005)
                    continue
                while i < target:
                    if i % every == every // 2:
                        key = f"probe-{i}".encode()
                        sent[key] = time.monotonic()
                        await producer.send(topic, value=values[i % len(values)], key=key)
                    else:
                        await producer.send(topic, value=values[i % len(values)],
                                            key=f"filler-{i}".encode())
                    i += 1
            await producer.flush()
            done_at[0] = time.monotonic()
            done.set()
            await reader
        finally:
            await producer.stop()
            await consumer.stop()
        lat = sorted((seen[k] - sent[k]) * 1000 for k in sent if k in seen)
        out: dict = {"offered_per_s": rate, "seconds": seconds, "probes": len(sent),
                     "probes_seen": len(lat)}
        if lat:
            q = quantiles(lat, n=1000, method="inclusive") if len(lat) > 1 else lat * 999
            out.update(p50_ms=round(q[499], 1), p99_ms=round(q[989], 1),
                       max_ms=round(lat[-1], 1))
        return out

    return asyncio.run(run())


def paced_send(bootstrap: str, plan: list[tuple[str, bytes, bytes, object]], rate: int,
               linger_ms: int = 0) -> tuple[float, dict[object, float], dict[object, int]]:
    """Send ``plan`` (``(topic, key, value, probe id or None)``) at ``rate`` records/s (catching
    up in bursts when behind) with an aiokafka producer (acks=all, idempotent, as
    ``streams.kafka.publishing.Publisher``; ``linger_ms`` 0 like the bare probe: a 5 ms linger
    is 5 ms of every probe's latency) in its own event loop;
    returns the seconds the sending took, each probe's ``send()`` time (``time.monotonic``) and
    its index in ``plan``. The harness's producer: the kafka-python ``Publisher`` in the same
    process stalled the paced loop by hundreds of ms (docs/benchmarks.md)."""
    from aiokafka import AIOKafkaProducer

    async def run() -> tuple[float, dict[object, float], dict[object, int]]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                    enable_idempotence=True, linger_ms=linger_ms)
        await producer.start()
        sent_at: dict[object, float] = {}
        index_of: dict[object, int] = {}
        now = time.monotonic
        try:
            t0, i, total = now(), 0, len(plan)
            while i < total:
                target = min(total, int((now() - t0) * rate) + 1)
                if i >= target:
                    await asyncio.sleep(0.0005)
                    continue
                while i < target:
                    topic, key, value, pid = plan[i]
                    if pid is not None:
                        sent_at[pid] = now()
                        index_of[pid] = i
                    await producer.send(topic, value=value, key=key)
                    i += 1
            seconds = now() - t0
            await producer.flush()
        finally:
            await producer.stop()
        return seconds, sent_at, index_of

    return asyncio.run(run())


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (``/proc/<pid>/stat``)."""
    import os

    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
