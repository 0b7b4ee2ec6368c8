"""The scheduler shim: applies gangstate commands inside a scheduler, fenced by epoch.

Where it sits: the consumer end of the ``commands`` topic and a producer into ``gang-events``. A
scheduler plugin (or a bridge to one) publishes ``gangstate.cycle/v1`` records through it and
asks it, at two points of a gang group's life, which pod should be the group's representative:

- ``after_post_filter(gang_group)``: after every PostFilter plugin has run for a member of the
  group (the AfterPostFilter hook of Koordinator PR #2490, ``frameworkext``), so a switch never
  races preemption (seed gap 2);
- ``pre_enqueue(gang_group)``: at the group's next PreEnqueue (Koordinator
  ``pkg/scheduler/plugins/coscheduling/coscheduling.go`` ``PreEnqueue``, where only the
  representative pod may enter activeQ).

Two layers, as the rest of gangstate:

- the **fencing core** (``producers.shim.fencing``: ``ShimState``, ``buffer_command``,
  ``apply_command``, ``apply_pending``, ``recover``): pure functions over frozen values, no
  clock, no I/O. It is what the simulator uses in-process and what the tables in
  ``tests/unit/test_shim.py`` exercise;
- the **Kafka shell** (``Shim``): a kafka-python consumer/producer in one background thread
  with a bounded inbox. Scheduler calls never touch Kafka: they drain the inbox without
  blocking, call the core, and hand acks to the background thread.

Fencing rule (contracts.md, ``gangstate.command/v1``): a command is applied only if its epoch is
greater than the group's fence and its ``expected_representative`` is still the group's
representative (compare-and-swap); every command is acked (``Applied``, ``Stale``,
``PreconditionFailed``) on ``gang-events`` keyed by gang group id. The fence is the highest
epoch this shim has *answered* with ``Applied`` or ``PreconditionFailed``: stricter than "the
last applied", so a redelivered command that once failed its precondition is never applied
later against a representative that has come back; it is acked ``Stale``.

Must not: block a scheduling cycle on Kafka, decide anything about gangs (that is the fold's
job), or apply a command twice.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from typing import Any, Callable, Iterable, Mapping

from producers.shim.fencing import (AckDict, CommandDict, ShimState, apply_pending, buffer_command,
                                    recover)
from streams.wire.contracts import ACK_SCHEMA, AckRecord, Command, CycleRecord

log = logging.getLogger(__name__)


# -- the Kafka shell ---------------------------------------------------------------------------

def _now_rfc3339() -> str:
    from datetime import datetime, timezone
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Shim:
    """A scheduler's connection to gangstate over Kafka (kafka-python), never blocking a cycle.

    ``settings``: a ``streams.kafka.settings.Settings`` (bootstrap, topic names). ``gang_groups``: the
    gang group ids this scheduler owns (``None`` = every group). ``shim_id``: stable identity
    written into acks and used as the consumer group suffix; keep it across restarts so that
    ``start`` finds its own acks. ``inbox_size``: bound of the command queue between the Kafka
    thread and scheduler calls (the Kafka thread waits when it is full, the scheduler never).
    ``clock``: returns the RFC 3339 ``observed_at`` for acks (default: the wall clock, as the
    scheduler acts in real time).

    Lifecycle: ``start()`` recovers the fences from the acks already on ``gang-events`` (reads
    the topic from the beginning to its end offsets) and starts the background thread;
    ``close()`` stops it, flushing acks. Errors: ``start`` raises ``kafka.errors.KafkaError``
    when the broker cannot be reached; the background thread logs and retries delivery errors.

    Delivery: command offsets are committed only after the acks of every command before them in
    the partition have been delivered, so a crash re-delivers unanswered commands (at-least-once
    in, fenced to at-most-once applied). One window remains: a command applied in memory whose
    ack was not yet delivered when the process died is re-decided after the restart; the
    restarted scheduler has lost its in-memory representative too, so the CAS decides it anew.
    """

    def __init__(self, settings: Any, gang_groups: Iterable[str] | None = None,
                 shim_id: str = "koord-scheduler", scheduler: str = "koord-scheduler",
                 inbox_size: int = 1024, clock: Callable[[], str] = _now_rfc3339,
                 poll_ms: int = 100) -> None:
        self.settings = settings
        self.groups = None if gang_groups is None else set(gang_groups)
        self.shim_id = shim_id
        self.scheduler = scheduler
        self.clock = clock
        self.poll_ms = poll_ms
        self.state = ShimState()
        self.representatives: dict[str, str | None] = {}
        self.acks_sent: list[AckDict] = []
        self._inbox: queue.Queue[tuple[CommandDict, Any, int]] = queue.Queue(inbox_size)
        self._outbox: queue.SimpleQueue[tuple[str, dict[str, Any], Any]] = queue.SimpleQueue()
        self._offsets: dict[str, list[tuple[Any, int]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Any = None
        self._producer: Any = None
        self.errors = 0

    # scheduler-facing API (never blocks on Kafka) ---------------------------------------------

    def publish_cycle(self, record: Mapping[str, Any]) -> None:
        """Queue one ``gangstate.cycle/v1`` record (a dict) for ``gang-events``, keyed by its
        gang; remembers its ``representative`` as the group's current one. Raises
        ``pydantic.ValidationError`` for a record that breaks the contract."""
        rec = CycleRecord.model_validate(record)
        group = rec.gang_group or rec.gang
        with self._lock:
            self.representatives[group] = rec.representative
        self._outbox.put((rec.gang, dict(record), None))

    def set_representative(self, gang_group: str, representative: str | None) -> None:
        """Tell the shim the group's representative as the scheduler sees it (``ns/name``)."""
        with self._lock:
            self.representatives[gang_group] = representative

    def after_post_filter(self, gang_group: str, candidates: Iterable[str] | None = None,
                          ) -> str | None:
        """The AfterPostFilter point: apply the group's buffered commands; returns the
        representative to use (``ns/name`` or ``None``). ``candidates``: the group's pending
        member pods; a command naming another pod fails its precondition."""
        return self._apply_point(gang_group, candidates)

    def pre_enqueue(self, gang_group: str, candidates: Iterable[str] | None = None,
                    ) -> str | None:
        """The group's PreEnqueue point: same as ``after_post_filter``; the scheduler lets only
        the returned pod into activeQ (Koordinator ``coscheduling.go`` ``PreEnqueue``)."""
        return self._apply_point(gang_group, candidates)

    def _apply_point(self, gang_group: str, candidates: Iterable[str] | None) -> str | None:
        with self._lock:
            self._drain_inbox()
            current = self.representatives.get(gang_group)
            self.state, rep, acks = apply_pending(
                self.state, gang_group, current, at=self.clock(), candidates=candidates,
                shim_id=self.shim_id)
            self.representatives[gang_group] = rep
            for ack in acks:
                self.acks_sent.append(ack)
                self._outbox.put((gang_group, ack, self._pop_offset(ack["command_id"])))
        return rep

    def pending(self, gang_group: str) -> int:
        """Commands of the group received and waiting for its next apply point (a count)."""
        with self._lock:
            self._drain_inbox()
            return len(self.state.pending.get(gang_group, ()))

    def _drain_inbox(self) -> None:
        while True:
            try:
                command, tp, offset = self._inbox.get_nowait()
            except queue.Empty:
                return
            self.state = buffer_command(self.state, command)
            self._offsets.setdefault(command["id"], []).append((tp, offset))

    def _pop_offset(self, command_id: str) -> Any:
        places = self._offsets.pop(command_id, [])
        return places

    # lifecycle and the Kafka thread -----------------------------------------------------------

    def start(self, recover_timeout: float = 30.0) -> None:
        """Recover fences from this shim's acks on ``gang-events``, then start consuming
        ``commands`` in a background thread. Raises ``kafka.errors.KafkaError`` on connection
        failure and ``TimeoutError`` if the read-back does not reach the end offsets in time."""
        from kafka import KafkaConsumer, KafkaProducer

        acks = read_acks(self.settings, recover_timeout)
        self.state = recover(acks, self.shim_id, self.groups)
        log.info("shim %s recovered fences for %d gang groups", self.shim_id,
                 len(self.state.fences))
        self._producer = KafkaProducer(**self.settings.kafka_python(
            client_id=f"gangstate-shim-{self.shim_id}",
            acks="all", enable_idempotence=True, retries=10, linger_ms=5,
            key_serializer=lambda k: None if k is None else k.encode("utf-8"),
            value_serializer=lambda v: json.dumps(v, separators=(",", ":")).encode()))
        self._consumer = KafkaConsumer(**self.settings.kafka_python(
            group_id=f"{self.settings.app_id}-shim-{self.shim_id}",
            client_id=f"gangstate-shim-{self.shim_id}", enable_auto_commit=False,
            auto_offset_reset="earliest"))
        # Subscribe only once the broker reports the topic's partitions: a group joined while a
        # just-created topic has no metadata yet is assigned nothing, and kafka-python rejoins
        # only at the next metadata refresh (metadata_max_age_ms, 5 minutes by default).
        self._await_topic(self.settings.topics.commands, recover_timeout)
        self._consumer.subscribe([self.settings.topics.commands])
        self._thread = threading.Thread(target=self._run, name=f"shim-{self.shim_id}",
                                        daemon=True)
        self._thread.start()

    def _await_topic(self, topic: str, timeout: float) -> None:
        """Block until the consumer's metadata lists ``topic``'s partitions; raises
        ``TimeoutError`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self._consumer.partitions_for_topic(topic):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"topic {topic} has no partitions after {timeout:.0f} s")
            self._consumer.topics()  # forces a metadata refresh
            time.sleep(0.1)

    def wait_assigned(self, timeout: float = 30.0) -> bool:
        """Wait until the consumer owns its partitions (useful before the first command is
        produced in tests); returns False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._consumer is not None and self._consumer.assignment():
                return True
            time.sleep(0.05)
        return False

    def close(self) -> None:
        """Stop the background thread, deliver queued acks and cycle records, close clients."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for client in (self._consumer, self._producer):
            if client is not None:
                try:
                    client.close()
                except Exception:  # closing is best effort
                    log.exception("closing a kafka client")

    def _run(self) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        outstanding: dict[Any, set[int]] = {}
        seen: dict[Any, int] = {}
        committed: dict[Any, int] = {}
        while True:
            stopping = self._stop.is_set()
            if not stopping:
                try:
                    batches = self._consumer.poll(timeout_ms=self.poll_ms)
                except Exception:
                    self.errors += 1
                    log.exception("polling commands")
                    batches = {}
                for tp, records in batches.items():
                    for r in records:
                        seen[tp] = r.offset + 1
                        command = _decode_command(r.value)
                        if command is None or (self.groups is not None
                                               and command["gang_group"] not in self.groups):
                            continue
                        outstanding.setdefault(tp, set()).add(r.offset)
                        while not self._stop.is_set():
                            try:
                                self._inbox.put((command, tp, r.offset), timeout=0.2)
                                break
                            except queue.Full:
                                continue
            delivered = self._send_outbox()
            for places in delivered:
                for tp, offset in places:
                    outstanding.get(tp, set()).discard(offset)
            wanted = {tp: (min(outstanding[tp]) if outstanding.get(tp) else upto)
                      for tp, upto in seen.items()}
            if wanted != committed:
                try:
                    self._consumer.commit({TopicPartition(tp.topic, tp.partition):
                                           OffsetAndMetadata(off, "", -1)
                                           for tp, off in wanted.items()})
                    committed = wanted
                except Exception:
                    self.errors += 1
                    log.exception("committing command offsets")
            if stopping:
                return

    def _send_outbox(self) -> list[Any]:
        sent: list[Any] = []
        items = []
        while True:
            try:
                items.append(self._outbox.get_nowait())
            except queue.Empty:
                break
        if not items:
            return sent
        topic = self.settings.topics.gang_events
        for key, value, places in items:
            self._producer.send(topic, key=key, value=value)
            if places:
                sent.append(places)
        try:
            self._producer.flush(timeout=30)
        except Exception:
            self.errors += 1
            log.exception("delivering acks/cycle records; will retry")
            for item in items:
                self._outbox.put(item)
            return []
        return sent


def _decode_command(raw: bytes | None) -> dict[str, Any] | None:
    """A command record as a dict, or ``None`` (logged) when it breaks the contract."""
    if raw is None:
        return None
    try:
        return Command.model_validate_json(raw).model_dump(by_alias=True)
    except Exception as err:
        log.warning("skipping an invalid command: %s", err)
        return None


def read_acks(settings: Any, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Read every ``gangstate.ack/v1`` on ``gang-events`` from the beginning up to the end
    offsets at call time (no consumer group); returns them as dicts in partition order.
    Raises ``TimeoutError`` when the end is not reached within ``timeout`` seconds and
    ``kafka.errors.KafkaError`` when the broker cannot be reached."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(**settings.kafka_python(enable_auto_commit=False,
                                                     client_id="gangstate-shim-recovery"))
    try:
        topic = settings.topics.gang_events
        parts = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        if not tps:
            return []
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError("reading acks back from gang-events timed out")
            for records in consumer.poll(timeout_ms=200).values():
                for r in records:
                    if r.value and f'"{ACK_SCHEMA}"'.encode() in r.value:
                        try:
                            out.append(AckRecord.model_validate_json(r.value)
                                       .model_dump(by_alias=True))
                        except Exception:
                            continue
        return out
    finally:
        consumer.close()
