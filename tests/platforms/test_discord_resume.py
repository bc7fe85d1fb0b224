"""Discord's gateway replays: a RESUME delivers what was missed, and an overlap runs nothing twice;
a fresh IDENTIFY (a restart, an invalidated session) replays nothing, and catch-up reads it back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from discord_fake.harness import (
    ANN,
    BOB,
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

__all__ = ["fake", "run", "world"]


async def test_a_resume_replays_what_was_missed_and_an_overlap_runs_nothing_twice(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    for i in range(3):
        await fake.post(world.free, ANN, f"before {i}")
    await wait_for(lambda: len(fake.view(world.free.id)) == 3, 30, "three replies")
    fake.gateway.refuse_connections = True
    fake.gateway.replay_overlap = 50  # the replay also carries every frame the bot already had
    await fake.gateway.drop()
    for i in range(2):
        await fake.post(world.free, BOB, f"while away {i}")
    fake.gateway.refuse_connections = False
    await wait_for(lambda: fake.gateway.resumes == 1, 60, "the RESUME")
    await wait_for(lambda: len(fake.view(world.free.id)) == 5, 60, "the two missed messages answered")
    await fake.post(world.free, ANN, "after")
    await wait_for(lambda: len(fake.view(world.free.id)) == 6, 30, "the reply after the resume")
    assert fake.gateway.identifies == 1
    texts = [m.content for m in fake.view(world.free.id)]
    expected = [f"before {i}" for i in range(3)] + [f"while away {i}" for i in range(2)] + ["after"]
    assert texts == [echo_of(t) for t in expected]
    assert [r["text"] for r in inbox(tmp_path)] == expected


async def test_a_restart_catches_up_on_what_each_active_channel_got_meanwhile(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    config = discord_config(fake, world, tmp_path)
    gateway = await run(config)
    await connected(fake)
    await fake.post(world.free, ANN, "one")
    await fake.post(world.dm, ANN, "dm one")
    thread = world.threads[11]
    await fake.post(thread, BOB, "thread one", mention_bot=True)
    await wait_for(lambda: all(fake.view(c.id) for c in (world.free, world.dm, thread)), 30, "three replies")
    await gateway.stop()
    fake.gateway.forget_sessions()
    await fake.post(world.free, ANN, "while down")
    await fake.post(world.free, BOB, "also while down")
    await fake.post(world.free, BOB, "not for the bot, in a free channel it is")
    await fake.post(world.dm, ANN, "dm while down")
    await fake.post(thread, BOB, "thread while down", mention_bot=True)
    await fake.post(world.general, ANN, "a channel the bot never talked in", mention_bot=True)
    await run(config)
    await wait_for(lambda: len(fake.view(world.free.id)) == 4, 60, "the free channel caught up")
    await wait_for(
        lambda: len(fake.view(world.dm.id)) == 2 and len(fake.view(thread.id)) == 2, 60, "DM and thread"
    )
    assert fake.gateway.identifies == 2
    assert [m.content for m in fake.view(world.free.id)] == [
        echo_of(t)
        for t in ("one", "while down", "also while down", "not for the bot, in a free channel it is")
    ]
    assert fake.view(world.dm.id)[1].content == echo_of("dm while down")
    assert fake.view(thread.id)[1].content == echo_of("thread while down")
    assert fake.view(world.general.id) == []  # not a channel with a session: not read back
    rows = inbox(tmp_path)
    assert len(rows) == len({r["delivery_id"] for r in rows}) == 8


async def test_an_invalidated_session_identifies_afresh_and_catches_up(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    await fake.post(world.free, ANN, "first")
    await wait_for(lambda: fake.view(world.free.id), 30, "the first reply")
    fake.gateway.refuse_connections = True
    await fake.gateway.drop()
    fake.gateway.forget_sessions()  # Discord forgot the session: the RESUME is refused
    await fake.post(world.free, ANN, "lost by the gateway, found by catch-up")
    fake.gateway.refuse_connections = False
    await wait_for(lambda: fake.gateway.identifies == 2, 60, "a fresh IDENTIFY")
    await wait_for(lambda: len(fake.view(world.free.id)) == 2, 60, "the caught-up reply")
    assert fake.view(world.free.id)[1].content == echo_of("lost by the gateway, found by catch-up")
