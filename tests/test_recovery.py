"""Worker start-up on an existing table (``streams.app``): Faust's flow control keeps the
records that reach the agent while a table recovery ends."""

from __future__ import annotations

import asyncio

from mode.utils.queues import FlowControlQueue

from streams.app import _FlowControl


def test_resume_of_a_running_flow_keeps_the_queued_records():
    """Faust calls ``flow_control.resume()`` again at the end of a recovery, after the stream
    partitions are already fetching; that call must not drop what they queued."""

    async def run() -> None:
        flow = _FlowControl()
        queue: FlowControlQueue = FlowControlQueue(flow_control=flow, clear_on_resume=True)
        queue.put_nowait("stale")
        flow.resume()  # suspended -> running: records of the old assignment go
        assert queue.qsize() == 0
        queue.put_nowait("fresh")
        flow.resume()  # already running: keep
        assert queue.qsize() == 1
        flow.suspend()
        flow.resume()
        assert queue.qsize() == 0

    asyncio.run(run())
