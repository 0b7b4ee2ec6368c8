"""Every change gangstate makes to Faust and aiokafka, in one place: ``PatchedApp``.

Where it sits: inside the worker; ``streams.worker.app`` builds its app from ``PatchedApp``.
Each patch says what it fixes and why (a measured cost or a lost record), so that it can be
dropped when Faust fixes it upstream:

- ``FlowControl``: ``resume()`` clears the stream buffers only after a suspension (Faust's
  recovery otherwise drops records fetched while it ends);
- ``_ConsumerThread`` (through ``_Consumer`` and ``_Transport``): a shorter fetch long-poll
  (``FETCH_MAX_WAIT_MS``), so table recovery's offset requests do not queue behind it;
- the batch path (``PatchedApp.batch_topic``, ``BatchBuffer``, ``_BatchConductor`` and
  ``_Consumer._drain_messages``): the records of a batch topic go from the consumer's fetch
  straight into a buffer that its agent takes in batches (``PatchedApp.batches``), instead of
  one Event at a time through Faust's conductor, channel queue and ``Stream``. Faust's own path
  costs 80-145 µs of CPU per record here (docs/benchmarks.md: a task pair and an
  ``asyncio.wait`` per record in the fetch loop, the per-event decode, queue, stream, ack and
  sensor calls); the batch path keeps Faust's app, consumer group, rebalancing, flow control,
  offset tracking and commits, tables and changelogs;
- ``_Producer`` (through ``_Transport``): a flush that waits until every message sent so far
  is delivered (``Undelivered``). Faust's ``ProducerBuffer.flush`` gives up when no message
  left its buffer for 100 ms, and an offset commit flushes the producer that way before it
  commits: on a busy broker (a rebalance, 2 cores) offsets were committed while the outputs of
  their records still sat in the buffer (a worker stopped then loses them; a reader who trusts
  the committed offsets reads before they exist: the batch rebalance test saw the last 6 gangs'
  diagnostics missing);
- ``RateLimitedWorker``: each kind of log line at most once per 10 s (aiokafka and Faust log
  about 110 error lines a second while the broker is down), and no terminal spinner (it wrote
  cursor escapes into a ``stdout`` that is a file).

The table's bulk recovery, a store of Faust's, is in ``streams.worker.table``.

Must not: change what the worker computes; only how Faust and aiokafka move records.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, AsyncIterator, Callable, cast

import faust
from faust.transport.conductor import Conductor
from faust.types import Message
from faust.transport.drivers import aiokafka as faust_aiokafka
from mode.utils.objects import cached_property
from mode.utils.queues import FlowControlEvent

from streams.kafka.logs import limit_handlers


FETCH_MAX_WAIT_MS = 100
"""Longest a fetch waits at the broker for new data, ms (Faust's own consumer: 1500)."""


class FlowControl(FlowControlEvent):
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


class BatchBuffer:
    """The records of one batch topic fetched and not yet taken by its agent (a FIFO of
    Faust ``Message`` objects, all partitions of the topic; per-partition order is fetch
    order). At most ``maxsize`` are held: the fetch loop waits for room (``_BatchHandler``).
    Registered with the app's flow control, so a rebalance clears it like Faust's stream
    queues (nothing in it is tracked or acked yet: the consumer re-reads it from the committed
    offsets)."""

    def __init__(self, maxsize: int) -> None:
        self.items: deque[Message] = deque()
        self.maxsize = maxsize
        self.ready = asyncio.Event()
        self.room = asyncio.Event()
        self.room.set()

    def __len__(self) -> int:
        return len(self.items)

    def clear(self) -> None:
        """Drop every record held (flow control calls this on a rebalance)."""
        self.items.clear()
        self.ready.clear()
        self.room.set()


class _BatchHandler:
    """The conductor's callback for one partition of a batch topic: appends each record to the
    topic's ``BatchBuffer``. ``offer(message)`` is the synchronous fast path the fetch loop
    takes (``False`` when it would have to wait); awaiting the handler waits as Faust's own
    callback does: for the flow (rebalance), for room in the buffer, for the producer buffer
    to ebb (``Conductor`` waits for the same three)."""

    def __init__(self, app: Any, buffer: BatchBuffer) -> None:
        self.app = app
        self.buffer = buffer
        self.flow_active = app.flow_control.is_active
        self.producer_buffer = app.producer.buffer

    def offer(self, message: Message) -> bool:
        """Append ``message`` without waiting; ``False`` (nothing done) when it must wait."""
        buffer = self.buffer
        if (len(buffer.items) >= buffer.maxsize or not self.flow_active()
                or self.producer_buffer.size > self.producer_buffer.max_messages):
            return False
        buffer.items.append(message)
        buffer.ready.set()
        return True

    async def __call__(self, message: Message) -> None:
        await self.app.flow_control.acquire()
        await self.producer_buffer.wait_until_ebb()
        buffer = self.buffer
        while len(buffer.items) >= buffer.maxsize:
            buffer.room.clear()
            await buffer.room.wait()
        buffer.items.append(message)
        buffer.ready.set()


class _BatchConductor(Conductor):
    """Faust's conductor, except that the partitions of a batch topic
    (``PatchedApp.batch_topic``) get a ``_BatchHandler`` instead of Faust's per-event
    delivery to the channels."""

    def _build_handler(self, tp: Any, channels: Any) -> Any:
        buffer = getattr(self.app, "batch_buffers", {}).get(tp.topic)
        if buffer is not None:
            return _BatchHandler(self.app, buffer)
        return super()._build_handler(tp, channels)


class _Consumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> Any:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def _drain_messages(self, fetcher: Any) -> None:  # pragma: no cover - the loop
        """Faust's fetch loop (``faust.transport.consumer.Consumer._drain_messages``, 0.15.3),
        except that a record of a batch topic goes straight to its ``_BatchHandler.offer``.
        Faust awaits every record's callback through ``Service.wait_first`` (two tasks and an
        ``asyncio.wait`` per record: about 40 % of an agent's CPU here); a record that must wait
        (flow suspended, buffer full) still takes that path. The read offsets, gaps and
        ``commit_every`` are kept as Faust keeps them."""
        callback = self.callback
        getmany = self.getmany
        consumer_should_stop = cast(Any, self)._stopped.is_set
        fetcher_should_stop = fetcher._stopped.is_set
        get_read_offset = self._read_offset.__getitem__
        set_read_offset = self._read_offset.__setitem__
        commit_every = self._commit_every
        acks_enabled_for = self.app.topics.acks_enabled_for
        conductor = self.app.topics
        handlers = conductor._tp_to_callback
        lock = conductor._tp_to_callback_lock
        yield_every = 100
        num_since_yield = 0
        sleep = asyncio.sleep
        try:
            while not (consumer_should_stop() or fetcher_should_stop()):
                ait = cast(AsyncIterator, getmany(timeout=1.0))
                await self.sleep(0)
                if self.should_stop:
                    continue
                async for tp, message in ait:
                    num_since_yield += 1
                    if num_since_yield > yield_every:
                        await sleep(0)
                        num_since_yield = 0
                    offset = message.offset
                    r_offset = get_read_offset(tp)
                    if r_offset is None or offset >= r_offset:
                        gap = offset - (r_offset or 0)
                        if gap > 1 and r_offset and acks_enabled_for(message.topic):
                            await self._add_gap(tp, r_offset + 1, offset)
                        if commit_every is not None and self._n_acked >= commit_every:
                            self._n_acked = 0
                            await self.commit()
                        handler = handlers.get(tp)
                        if not (isinstance(handler, _BatchHandler) and not lock.locked()
                                and handler.offer(message)):
                            await self.wait_first(callback(message), self.suspend_flow.wait())
                        set_read_offset(tp, offset)
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                return
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                return
            raise


class Undelivered:
    """The messages handed to a producer and not yet delivered (their futures not done), and
    the first delivery error. ``add`` a message's future when it is sent; ``wait`` returns once
    all are delivered."""

    def __init__(self) -> None:
        self.futures: set[asyncio.Future[Any]] = set()
        self.error: str | None = None

    def add(self, fut: asyncio.Future[Any]) -> None:
        """Track ``fut`` (a Faust ``FutureMessage``) until it is done."""
        self.futures.add(fut)
        fut.add_done_callback(self._done)

    def _done(self, fut: asyncio.Future[Any]) -> None:
        self.futures.discard(fut)
        if self.error is None and not fut.cancelled() and fut.exception() is not None:
            self.error = f"{type(fut.exception()).__name__}: {fut.exception()}"

    async def wait(self, stopping: Callable[[], bool], poll_seconds: float = 0.5) -> None:
        """Wait until every tracked message is delivered. Raises ``RuntimeError`` when one
        failed (``error``), or when ``stopping()`` turns true with messages undelivered (the
        producer will not send them): a commit must not go past outputs that are not out."""
        while self.futures:
            if stopping():
                raise RuntimeError(f"not committing: {len(self.futures)} outputs not "
                                   f"delivered and the producer is stopping")
            await asyncio.wait(set(self.futures), timeout=poll_seconds)
        if self.error is not None:
            raise RuntimeError(f"not committing: an output was not delivered ({self.error})")


class _Producer(faust_aiokafka.Producer):
    """Faust's aiokafka producer whose ``flush`` (called by every offset commit before it
    commits) returns only when everything sent so far is delivered (``Undelivered``)."""

    @cached_property
    def undelivered(self) -> Undelivered:
        """The messages sent through ``send_soon`` and not yet delivered."""
        return Undelivered()

    def send_soon(self, fut: Any) -> None:
        """Buffer ``fut`` (a ``FutureMessage``) as Faust does, tracked until delivered."""
        self.undelivered.add(fut)
        super().send_soon(fut)

    async def flush(self) -> None:
        """Faust's flush, then wait until every message sent is delivered."""
        await super().flush()
        buffer = self.buffer
        await self.undelivered.wait(
            lambda: bool(self.should_stop or buffer.should_stop or buffer.crashed))


class _Transport(faust_aiokafka.Transport):
    Consumer = _Consumer
    Conductor = _BatchConductor
    Producer = _Producer


class PatchedApp(faust.App):
    """``faust.App`` with ``FlowControl`` (records fetched while a recovery ends are kept),
    a ``_ConsumerThread`` (shorter fetch long-poll) and batch topics (``batch_topic``,
    ``batches``)."""

    def batch_topic(self, topic: Any, max_buffered: int = 5000) -> BatchBuffer:
        """Deliver ``topic``'s records in batches: its agent reads them with ``batches``
        (not by iterating its stream). Call before the app starts; at most ``max_buffered``
        records are held between the fetch and the agent."""
        buffers: dict[str, BatchBuffer] = self.__dict__.setdefault("batch_buffers", {})
        buffer = BatchBuffer(max_buffered)
        for name in topic.topics:
            buffers[name] = buffer
        self.flow_control.manage_queue(cast(Any, buffer))
        return buffer

    async def batches(self, topic: Any, max_records: int
                      ) -> AsyncIterator[list[Message]]:
        """The records of batch topic ``topic`` (``batch_topic``), up to ``max_records`` at a
        time, in fetch order, as soon as any are fetched (no wait for a batch to fill).

        Per batch, as Faust's ``Stream`` does per event: records fetched before the current
        rebalance generation, or while the flow is suspended, are dropped unacked (the
        consumer reads them again from the committed offset); the others are tracked as
        unacked (a rebalance or shutdown waits for them) and acked when the caller asks for
        the next batch, so their offsets can be committed. A batch the caller does not finish
        (it raised, or the agent was stopped) is neither acked nor left tracked: its offsets are
        not committed, so a restart or rebalance reads it again. Sensors' per-message calls
        (``on_message_in``, stream events) are not made."""
        buffer = self.__dict__["batch_buffers"][topic.topics[0]]
        items = buffer.items
        popleft = items.popleft
        consumer = self.consumer
        unacked_add = consumer.unacked.add
        unacked_discard = consumer.unacked.discard
        ack: Callable[[Message], bool] = consumer.ack
        flow_active = self.flow_control.is_active
        while True:
            if not items:
                buffer.ready.clear()
                await buffer.ready.wait()
                continue
            batch = [popleft() for _ in range(min(len(items), max_records))]
            if len(items) <= buffer.maxsize // 2:
                buffer.room.set()
            generation = self.consumer_generation_id
            if not flow_active():
                continue
            batch = [m for m in batch if m.generation_id == generation]
            if not batch:
                continue
            for message in batch:
                unacked_add(message)
            try:
                yield batch
            except BaseException:
                # the agent raised or was stopped (the generator is closed): not acked, and
                # not tracked either, or a rebalance would wait for these forever
                for message in batch:
                    unacked_discard(message)
                raise
            for message in batch:
                ack(message)

    @cached_property
    def flow_control(self) -> FlowControlEvent:
        """Flow control of streams (``FlowControl``)."""
        return FlowControl(loop=self.loop)

    def _new_transport(self) -> Any:
        url = self.conf.broker_consumer[0]
        if url.scheme not in ("kafka", "aiokafka"):
            return super()._new_transport()
        return _Transport(self.conf.broker_consumer, self)


class RateLimitedWorker(faust.Worker):
    """``faust.Worker`` whose log handlers write each kind of line at most once per 10 s
    (``streams.kafka.logs.RateLimitFilter``): a worker whose broker is down wrote about 110
    error lines a second (connect, metadata, fetch, coordinator), 720 in 10 s measured here;
    now one per kind per 10 s, with the count of the ones dropped.

    It has no terminal spinner (``spinner`` is ``None``): Faust's ``Spinner`` writes the cursor
    hide/show escapes (``\\x1b[?25l``, ``\\x1b[?25h``) and a backspace to ``stdout`` whether
    or not it is a terminal, so ``gangstate worker > worker.log`` got them in the file; the
    worker runs with ``quiet=True``, so the spinner had no "starting" line to spin on anyway.
    Without it Faust also leaves the root logger at the worker's level instead of DEBUG
    (``faust.Worker._setup_spinner_handler``)."""

    def __init__(self, *services: Any, **kwargs: Any) -> None:
        """``faust.Worker(*services, **kwargs)``, then no spinner."""
        super().__init__(*services, **kwargs)
        self.spinner = None

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        """Faust's set-up of the root logger, then the rate limit on its handlers."""
        super().on_setup_root_logger(logger, level)
        limit_handlers(logger)
