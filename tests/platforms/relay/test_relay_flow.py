"""The relay intake under a flood: acks that are ready together share a WebSocket message, and
a connector that sends faster than the gateway commits is held back at the socket (bounded),
with nothing lost."""

from __future__ import annotations

import asyncio
from typing import Any

from chatgate.platforms.relay.adapter import MAX_QUEUED_FRAMES
from chatgate.platforms.relay.coalesce import FrameCoalescer
from support.relay_harness import GW, RelayWorld, relay_hub


def event(chat: int, k: int) -> dict[str, Any]:
    source = {"platform": "discord", "chat_id": f"c{chat}", "chat_type": "dm", "user_id": f"u{chat}"}
    return {"text": f"message {k}", "message_id": f"m{k:05d}", "source": source}


async def flood(world: RelayWorld, frames: list[dict[str, Any]]) -> list[str]:
    """All but the last frame committed to the simulator's buffer unsent; injecting the last then
    sends every one of them back to back, as fast as the socket takes them."""
    sim = world.sim
    held = [await sim.buffer.append(GW, {"type": "inbound", "event": f}) for f in frames[:-1]]
    last = await sim.inject_inbound(GW, frames[-1])
    return [str(e.buffer_id) for e in held] + [last]


async def test_acks_ready_in_the_same_tick_share_one_message_and_each_is_sent_once(
    world: RelayWorld,
) -> None:
    await world.start()
    await world.sim.wait_live(GW, 10)
    ids = await flood(world, [event(i % 20, i // 20) for i in range(300)])
    await world.wait_for(lambda: not world.sim.unacked(GW), "every frame acked")
    counters = world.sim.counters(GW)
    assert counters.acks_in == len(ids)  # one ack line per delivery, never one for two
    assert counters.ack_messages < counters.acks_in  # several acks went out in one message
    rows = world.query("SELECT COUNT(DISTINCT delivery_id) FROM inbox WHERE transport = 'relay'")
    assert rows == [(len(ids),)]


async def test_a_connector_flood_is_held_at_the_socket_by_a_bounded_queue_and_nothing_is_lost(
    world: RelayWorld,
) -> None:
    gateway = await world.start()
    await world.sim.wait_live(GW, 10)
    hub = relay_hub(gateway)
    sizes: list[int] = []
    stop = asyncio.Event()

    async def sample() -> None:  # what the reader queued, every loop iteration
        while not stop.is_set():
            sizes.append(hub._queue.qsize())
            await asyncio.sleep(0)

    sampler = asyncio.create_task(sample())
    # One chat: its admissions are strictly serial, so the reader outruns them and the lanes'
    # own bound (1024 waiting) fills first; then the reader's queue does.
    count = 1024 + MAX_QUEUED_FRAMES + 300
    try:
        ids = await flood(world, [event(0, k) for k in range(count)])
        await world.wait_for(lambda: not world.sim.unacked(GW), "every frame acked", timeout=120)
    finally:
        stop.set()
        await sampler
    assert max(sizes) <= MAX_QUEUED_FRAMES
    assert hub.peak_queued == MAX_QUEUED_FRAMES  # it did fill: the reader waited, and read on after
    rows = world.query("SELECT delivery_id FROM inbox WHERE transport = 'relay' ORDER BY seq")
    assert [r[0] for r in rows] == [f"discord:c0:m{k:05d}" for k in range(count)]  # all, once, in order
    assert world.sim.counters(GW).acks_in == len(ids)


async def test_the_coalescer_writes_frames_ready_together_as_one_message_and_never_holds_one_back() -> None:
    written: list[str] = []

    async def write(text: str) -> bool:
        written.append(text)
        return True

    coalescer = FrameCoalescer(write)
    assert await asyncio.gather(*(coalescer.send(f"a{i}\n") for i in range(3))) == [True] * 3
    assert written == ["a0\na1\na2\n"]
    assert await coalescer.send("b\n") is True  # alone in its tick: written without waiting for company
    assert written[-1] == "b\n" and coalescer.messages == 2


async def test_frames_whose_message_could_not_be_written_are_all_reported_unsent() -> None:
    async def write(text: str) -> bool:
        return False  # the socket closed under the write

    coalescer = FrameCoalescer(write)
    assert await asyncio.gather(coalescer.send("a\n"), coalescer.send("b\n")) == [False, False]
    assert coalescer.messages == 0
