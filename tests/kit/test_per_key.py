"""PerKeyQueues: one key's work in arrival order; beyond ``max_pending`` a ``put`` waits its turn
and a ``try_put`` (the Discord lane's, from discord.py's synchronous parser callback) queues
nothing, so what a stranger's traffic can make it hold is bounded."""

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


async def test_try_put_beyond_max_pending_queues_nothing_and_keeps_each_keys_order() -> None:
    queues = PerKeyQueues(max_pending=3, name="t")
    gate = asyncio.Event()
    done: list[str] = []
    work = _recorder(done, gate)
    names = [f"{key}{n}" for n in range(5) for key in "abc"]
    taken = [name for name in names if queues.try_put(name[0], work(name))]  # type: ignore[operator]
    assert taken == ["a0", "b0", "c0"]
    assert queues.pending == 3
    gate.set()
    await asyncio.wait_for(queues.wait_idle(), 5)
    assert sorted(done) == taken
    assert queues.try_put("a", work("a1"))  # type: ignore[operator]  # room again
    await asyncio.wait_for(queues.wait_idle(), 5)
    assert done[-1] == "a1" and queues.pending == 0


async def test_put_waits_for_room_behind_work_that_waited_before_it() -> None:
    queues = PerKeyQueues(max_pending=1, name="t")
    gate = asyncio.Event()
    done: list[str] = []
    work = _recorder(done, gate)
    await queues.put("k", work("first"))  # type: ignore[operator]
    second = asyncio.create_task(queues.put("k", work("second")))  # type: ignore[operator]
    await asyncio.sleep(0.01)  # no room: it waits
    third = asyncio.create_task(queues.put("k", work("third")))  # type: ignore[operator]
    await asyncio.sleep(0.01)
    assert not third.done(), "put returned with no room"
    gate.set()
    await asyncio.wait_for(asyncio.gather(second, third), 5)
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
    after = asyncio.create_task(queues.put("k", work("after")))  # type: ignore[operator]
    await asyncio.gather(cancelled, return_exceptions=True)
    gate.set()
    await asyncio.wait_for(after, 5)
    await asyncio.wait_for(queues.wait_idle(), 5)
    assert done == ["first", "after"]


async def test_aclose_cancels_running_and_waiting_work_and_a_waiting_put() -> None:
    queues = PerKeyQueues(max_pending=1, name="t")
    done: list[str] = []
    work = _recorder(done, asyncio.Event())  # never set: the work hangs
    await queues.put("k", work("running"))  # type: ignore[operator]
    waiting = asyncio.create_task(queues.put("k", work("waiting")))  # type: ignore[operator]
    putter = asyncio.create_task(queues.put("j", work("putter")))  # type: ignore[operator]
    await asyncio.sleep(0.01)
    await asyncio.wait_for(queues.aclose(), 5)
    results = await asyncio.gather(waiting, putter, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    assert done == [] and queues.pending == 0
    await asyncio.wait_for(queues.wait_idle(), 1)


async def test_a_work_cancelled_from_inside_gives_its_room_back_and_the_next_work_runs() -> None:
    queues = PerKeyQueues(max_pending=1, name="t")
    done: list[str] = []

    async def cancelled_inside() -> None:
        inner = asyncio.get_running_loop().create_future()
        inner.cancel()  # as when something the work awaited was cancelled by someone else
        await inner

    async def after() -> None:
        done.append("after")

    assert queues.try_put("k", cancelled_inside)
    await asyncio.wait_for(queues.wait_idle(), 5)
    assert queues.pending == 0
    assert queues.try_put("k", after), "the cancelled work kept its room"
    await asyncio.wait_for(queues.wait_idle(), 5)
    assert done == ["after"]
