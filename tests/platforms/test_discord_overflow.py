"""A full Discord lane holds no more events: messages beyond it stay on Discord and each channel
is read back, in order, once the lane drains; nothing is lost or answered twice.

The lane fills for real: the test holds SQLite's write lock from its own connection, so no
admission can commit and every queued event waits, as it would behind a stalled disk."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from discord_fake.harness import (
    ANN,
    World,
    connected,
    discord_config,
    echo_of,
    fake,
    inbox,
    run,
    wait_for,
    world,
)
from discord_fake.server import FakeDiscord

from chatgate.platforms.discord import lane as lane_module

__all__ = ["fake", "run", "world"]
ROOM = 4


async def test_messages_beyond_a_full_lane_are_read_back_in_order_once_it_drains(
    fake: FakeDiscord,
    world: World,
    run: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(lane_module, "MAX_PENDING", ROOM)
    gateway = await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    lane = gateway.adapters["discord"].lane
    await fake.post(world.free, ANN, "warm-up")  # the channel is known before the lock is taken
    await wait_for(lambda: fake.view(world.free.id), 30, "the warm-up reply")
    await wait_for(lambda: lane.queues.pending == 0, 30, "the warm-up's work to leave the lane")

    locker = sqlite3.connect(tmp_path / "state" / "chatgate.db", isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")  # no admission can commit until the test lets go
    channels = {"free": world.free, "dm": world.dm}
    sent: dict[str, list[str]] = {"free": [], "dm": []}
    try:
        for i in range(12):
            name = "free" if i % 2 == 0 else "dm"
            sent[name].append(f"{name} {i}")
            await fake.post(channels[name], ANN, f"{name} {i}")
        await wait_for(lambda: lane.overflow.dropped == 12 - ROOM, 30, "the events beyond the room")
        assert lane.queues.pending == ROOM, "the lane held more than its room"
        assert lane.overflow.holds(world.free.id) and lane.overflow.holds(world.dm.id)
        assert not fake.of("GET", "/messages?"), "a channel was read back before the lane drained"
    finally:
        locker.execute("ROLLBACK")
        locker.close()

    replies = {world.free.id: 1 + len(sent["free"]), world.dm.id: len(sent["dm"])}
    await wait_for(lambda: all(len(fake.view(c)) >= n for c, n in replies.items()), 60, "every reply")
    await wait_for(lambda: lane.queues.pending == 0, 30, "the lane to drain")
    for name, channel in channels.items():
        expected = (["warm-up"] if name == "free" else []) + sent[name]
        assert [m.content for m in fake.view(channel.id)] == [echo_of(t) for t in expected]
    texts = [r["text"] for r in inbox(tmp_path)]
    assert sorted(texts) == sorted(["warm-up", *sent["free"], *sent["dm"]])  # each admitted once
    read_back = {c.path.split("/")[4] for c in fake.of("GET", "/messages?")}
    assert read_back == {world.free.id, world.dm.id}
    full = [r for r in caplog.records if r.levelno == logging.WARNING and "Discord intake" in r.getMessage()]
    assert [r.getMessage().split(":")[0] for r in full] == [
        "Discord intake is full",
        "Discord intake drained",
    ]
    assert not lane.overflow.full and lane.overflow.lost == 0


async def test_a_message_to_a_channel_waiting_for_its_read_back_is_not_answered_before_older_ones(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Room frees one event at a time, and the read-back waits for half of it: a message that
    arrives in between, to a channel that has messages left on Discord, must not overtake them."""
    monkeypatch.setattr(lane_module, "MAX_PENDING", 8)
    gateway = await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    lane = gateway.adapters["discord"].lane
    await fake.post(world.free, ANN, "warm-up")
    await fake.post(world.dm, ANN, "dm warm-up")
    await wait_for(lambda: fake.view(world.free.id) and fake.view(world.dm.id), 30, "the warm-up replies")

    locker = sqlite3.connect(tmp_path / "state" / "chatgate.db", isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    try:
        for i in range(8):
            await fake.post(world.free, ANN, f"free {i}")  # fills the lane
        await fake.post(world.dm, ANN, "dm left on Discord")
        await wait_for(lambda: lane.overflow.holds(world.dm.id), 30, "the DM left on Discord")
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    deadline = asyncio.get_running_loop().time() + 30
    while lane.queues.pending >= 8:  # the first admission went through: room, but not yet half
        assert asyncio.get_running_loop().time() < deadline, "the lane never moved"
        await asyncio.sleep(0.001)
    await fake.post(world.dm, ANN, "dm after room freed")
    await wait_for(lambda: len(fake.view(world.dm.id)) >= 3, 60, "the DM replies")
    await wait_for(lambda: len(fake.view(world.free.id)) >= 9, 60, "the channel's replies")
    assert [m.content for m in fake.view(world.dm.id)] == [
        echo_of(t) for t in ("dm warm-up", "dm left on Discord", "dm after room freed")
    ]
    assert [m.content for m in fake.view(world.free.id)] == [
        echo_of(t) for t in ["warm-up", *(f"free {i}" for i in range(8))]
    ]


async def test_a_read_back_that_fails_holds_its_channel_and_is_tried_again(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Discord rate-limits every history read of the first try: the channel stays held (its later
    messages are not admitted ahead), and the retry reads what was left, in order, once."""
    monkeypatch.setattr(lane_module, "MAX_PENDING", 2)
    monkeypatch.setattr(lane_module, "READ_BACK_RETRY_SECONDS", 0.3)
    gateway = await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    lane = gateway.adapters["discord"].lane
    await fake.post(world.free, ANN, "warm-up")
    await wait_for(lambda: fake.view(world.free.id), 30, "the warm-up reply")
    await wait_for(lambda: lane.queues.pending == 0, 30, "the warm-up's work to leave the lane")
    fake.rate_limit("GET", "/channels/{cid}/messages", times=5, retry_after=0.05)

    locker = sqlite3.connect(tmp_path / "state" / "chatgate.db", isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    try:
        for i in range(5):
            await fake.post(world.free, ANN, f"free {i}")
        await wait_for(lambda: lane.overflow.holds(world.free.id), 30, "the messages left on Discord")
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    await wait_for(lambda: len(fake.of("GET", "/messages?")) >= 5, 30, "the first, refused, read-back")
    await fake.post(world.free, ANN, "after the failed read")
    await wait_for(lambda: len(fake.view(world.free.id)) >= 7, 60, "every reply")
    expected = ["warm-up", *(f"free {i}" for i in range(5)), "after the failed read"]
    assert [m.content for m in fake.view(world.free.id)] == [echo_of(t) for t in expected]
    assert sorted(r["text"] for r in inbox(tmp_path)) == sorted(expected)
    assert len(fake.of("GET", "/messages?")) >= 6, "the channel was never read again"
