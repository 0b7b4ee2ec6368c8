"""``streams.worker.faust_patches.Undelivered``: the producer flush that an offset commit waits
on returns only when every output sent is delivered (Faust's own gives up after 100 ms)."""

from __future__ import annotations

import asyncio

import pytest

from streams.worker.faust_patches import Undelivered


def test_wait_returns_only_after_the_last_message_is_delivered() -> None:
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        tracked = Undelivered()
        first, second = loop.create_future(), loop.create_future()
        tracked.add(first)
        tracked.add(second)
        steps: list[str] = []

        async def deliver() -> None:
            await asyncio.sleep(0)  # the flush starts waiting first
            first.set_result("offset 1")
            steps.append("first delivered")
            # far longer than Faust's 100 ms give-up: the flush must still be waiting
            await asyncio.sleep(0.3)
            steps.append("second delivered")
            second.set_result("offset 2")

        delivering = asyncio.create_task(deliver())
        await tracked.wait(lambda: False, poll_seconds=0.05)
        steps.append("flushed")
        await delivering
        assert tracked.futures == set()
        return steps

    assert asyncio.run(main()) == ["first delivered", "second delivered", "flushed"]


def test_a_failed_delivery_stops_the_commit_with_its_reason() -> None:
    async def main() -> None:
        fut = asyncio.get_running_loop().create_future()
        tracked = Undelivered()
        tracked.add(fut)
        fut.set_exception(ConnectionError("broker gone"))
        await asyncio.sleep(0)  # the done callback runs
        await tracked.wait(lambda: False)

    with pytest.raises(RuntimeError, match=r"^not committing: an output was not delivered "
                                           r"\(ConnectionError: broker gone\)$"):
        asyncio.run(main())


def test_a_stopping_producer_with_messages_left_stops_the_commit() -> None:
    async def main() -> None:
        tracked = Undelivered()
        tracked.add(asyncio.get_running_loop().create_future())  # never delivered
        await tracked.wait(lambda: True)

    with pytest.raises(RuntimeError, match=r"^not committing: 1 outputs not delivered and the "
                                           r"producer is stopping$"):
        asyncio.run(main())
