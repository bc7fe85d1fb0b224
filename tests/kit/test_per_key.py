"""PerKeyQueues: one key's work in arrival order, beyond ``max_pending`` too, from ``put`` and
``put_nowait`` alike (the Discord lane queues from discord.py's synchronous parser callback)."""

from __future__ import annotations

import asyncio

import pytest

from chatgate.platforms.kit.per_key import PerKeyQueues


def _recorder(done: list[str], gate: asyncio.Event | None = None) -> object:
    def work(name: str) -> object:
        async def run() -> None:
            if gate is not None:
                await gate.wait()
            done.append(name)

        return run

    return work


async def test_put_nowait_beyond_max_pending_keeps_every_keys_order_and_loses_nothing() -> None:
    queues = PerKeyQueues(max_pending=3, name="t")
    gate = asyncio.Event()
    done: list[str] = []
    work = _recorder(done, gate)
    names = [f"{key}{n}" for n in range(5) for key in "abc"]
    for name in names:
        queues.put_nowait(name[0], work(name))  # type: ignore[operator]
    assert queues.pending == len(names)  # three queued, twelve waiting for room
    gate.set()
    await asyncio.wait_for(queues.wait_idle(), 5)
    assert sorted(done) == sorted(names)
    for key in "abc":
        assert [n for n in done if n[0] == key] == [f"{key}{n}" for n in range(5)]
    assert queues.pending == 0


async def test_put_waits_for_room_behind_work_that_waited_before_it() -> None:
    queues = PerKeyQueues(max_pending=1, name="t")
    gate = asyncio.Event()
    done: list[str] = []
    work = _recorder(done, gate)
    await queues.put("k", work("first"))  # type: ignore[operator]
    queues.put_nowait("k", work("second"))  # type: ignore[operator]  # no room: waits
    third = asyncio.create_task(queues.put("k", work("third")))  # type: ignore[operator]
    await asyncio.sleep(0.01)
    assert not third.done(), "put returned with no room"
    gate.set()
    await asyncio.wait_for(third, 5)
    await asyncio.wait_for(queues.wait_idle(), 5)
    assert done == ["first", "second", "third"]


@pytest.mark.parametrize("room_frees", ["after_the_cancel_lands", "before_the_cancel_lands"])
async def test_a_put_cancelled_while_waiting_queues_nothing_and_frees_its_turn(room_frees: str) -> None:
    queues = PerKeyQueues(max_pending=1, name="t")
    gate = asyncio.Event()
    done: list[str] = []
    work = _recorder(done, gate)
    await queues.put("k", work("first"))  # type: ignore[operator]
    cancelled = asyncio.create_task(queues.put("k", work("cancelled")))  # type: ignore[operator]
    await asyncio.sleep(0.01)
    if room_frees == "before_the_cancel_lands":
        gate.set()  # the first work ends (and frees room) before the cancelled put runs again
    cancelled.cancel()
    queues.put_nowait("k", work("after"))  # type: ignore[operator]
    await asyncio.gather(cancelled, return_exceptions=True)
    gate.set()
    await asyncio.wait_for(queues.wait_idle(), 5)
    assert done == ["first", "after"]


async def test_aclose_cancels_running_and_waiting_work_and_a_waiting_put() -> None:
    queues = PerKeyQueues(max_pending=1, name="t")
    done: list[str] = []
    work = _recorder(done, asyncio.Event())  # never set: the work hangs
    await queues.put("k", work("running"))  # type: ignore[operator]
    queues.put_nowait("k", work("waiting"))  # type: ignore[operator]
    putter = asyncio.create_task(queues.put("j", work("putter")))  # type: ignore[operator]
    await asyncio.sleep(0.01)
    await asyncio.wait_for(queues.aclose(), 5)
    results = await asyncio.gather(putter, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert done == [] and queues.pending == 0
    await asyncio.wait_for(queues.wait_idle(), 1)
