"""Every change gangstate makes to Faust and aiokafka, in one place: ``PatchedApp``.

Where it sits: inside the worker; ``streams.worker.app`` builds its app from ``PatchedApp``.
Each patch says what it fixes and why (a measured cost or a lost record), so that it can be
dropped when Faust fixes it upstream:

- ``FlowControl``: ``resume()`` clears the stream buffers only after a suspension (Faust's
  recovery otherwise drops records fetched while it ends);
- ``_ConsumerThread`` (through ``_Consumer`` and ``_Transport``): a shorter fetch long-poll
  (``FETCH_MAX_WAIT_MS``), so table recovery's offset requests do not queue behind it;
- ``RateLimitedWorker``: each kind of log line at most once per 10 s (aiokafka and Faust log
  about 110 error lines a second while the broker is down).

The table's bulk recovery, a store of Faust's, is in ``streams.worker.table``.

Must not: change what the worker computes; only how Faust and aiokafka move records.
"""

from __future__ import annotations

import logging
from typing import Any

import faust
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


class _Consumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> Any:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class _Transport(faust_aiokafka.Transport):
    Consumer = _Consumer


class PatchedApp(faust.App):
    """``faust.App`` with ``FlowControl`` (records fetched while a recovery ends are kept)
    and a ``_ConsumerThread`` (shorter fetch long-poll)."""

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
    now one per kind per 10 s, with the count of the ones dropped."""

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        """Faust's set-up of the root logger, then the rate limit on its handlers."""
        super().on_setup_root_logger(logger, level)
        limit_handlers(logger)
