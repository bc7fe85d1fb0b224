"""Replies on the fake Discord: previews by edit within the limits, 429s honoured as the rate budget's,
the 2,000-character limit, and a send never repeated behind the outbox's back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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

__all__ = ["fake", "run", "world"]
CURSOR = "▍"
EDIT = "/channels/{cid}/messages/{mid}"
SEND = "/channels/{cid}/messages"


async def test_429s_on_edits_skip_previews_and_the_final_still_arrives_within_the_channel_budget(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    fake.channel_budget = (5, 5.0)  # Discord's documented 5 messages per 5 s per channel
    config = discord_config(fake, world, tmp_path, agent={"echo": {"chunk_delay_ms": 150, "chunk_chars": 3}})
    await run(config)
    await connected(fake)
    fake.rate_limit("PATCH", EDIT, times=3, retry_after=1.5)
    text = "a question whose answer streams for a few seconds in many small chunks"
    await fake.post(world.free, ANN, text)
    await wait_for(
        lambda: any(m.content == echo_of(text) for m in fake.view(world.free.id)), 90, "the final reply"
    )
    shown = fake.view(world.free.id)
    assert [m.content for m in shown] == [echo_of(text)]  # one message, edited into the final
    edits = fake.of("PATCH", "/messages/")
    assert [c.status for c in edits[:3]] == [429, 429, 429] and edits[-1].status == 200
    assert not any(CURSOR in m.content for m in shown)
    assert fake.violations == []  # no call beyond the per-channel budget


async def test_a_long_reply_is_split_at_2000_characters(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path, agent={"echo": {"chunk_delay_ms": 0}}))
    await connected(fake)
    text = " ".join(f"word{i}" for i in range(700))  # ~5,600 characters echoed back
    await fake.post(world.free, ANN, text)
    await wait_for(lambda: len(fake.view(world.free.id)) >= 3, 90, "the parts")
    await wait_for(
        lambda: "".join(m.content for m in fake.view(world.free.id)).count("word699") == 1, 60, "the end"
    )
    parts = [m.content for m in fake.view(world.free.id)]
    assert all(len(p) <= 2000 for p in parts), [len(p) for p in parts]
    assert " ".join(p.strip() for p in parts).split() == echo_of(text).split()


async def test_a_server_error_on_a_send_is_resent_once_by_the_outbox_marked_as_a_possible_repeat(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    config = discord_config(fake, world, tmp_path, delivery={"duplicate_marker": "(maybe repeated) "})
    await run(config)
    await connected(fake)
    fake.fail_sends = 1
    await fake.post(world.free, ANN, "hello")
    await wait_for(lambda: fake.view(world.free.id), 60, "the resent reply")
    sends = fake.of("POST", f"/channels/{world.free.id}/messages")
    assert [c.status for c in sends] == [
        500,
        200,
    ]  # discord.py's own retry loop would have sent twice at once
    assert [m.content for m in fake.view(world.free.id)] == ["(maybe repeated) " + echo_of("hello")]


async def test_a_global_429_pauses_the_platform_for_its_retry_after(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    fake.rate_limit("POST", SEND, times=1, retry_after=2.0, scope="global")
    await fake.post(world.free, ANN, "first")
    await wait_for(lambda: fake.view(world.free.id), 60, "the reply after the global limit")
    sends = fake.of("POST", f"/channels/{world.free.id}/messages")
    assert [c.status for c in sends] == [429, 200]
    assert sends[1].at - sends[0].at >= 2.0 - 0.05  # honoured, not hammered
    assert [r["text"] for r in inbox(tmp_path)] == ["first"]


async def test_a_channels_429s_never_pause_another_channel(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    """Issue 33, finding 1: Discord scopes a non-global 429 to the channel's bucket. Two
    channels told to wait at once used to be read as the bot's limit and pause the platform;
    a third channel's reply now goes out while both still wait."""
    second = fake.channel(
        fake.guilds[str(world.free.guild_id)], "1400000000000000009", name="free-two", topic=None
    )
    config = discord_config(
        fake, world, tmp_path, discord={"free_response_channels": [world.free.id, second.id]}
    )
    await run(config)
    await connected(fake)
    fake.rate_limit("POST", SEND, times=2, retry_after=4.0)
    await fake.post(world.free, ANN, "first channel")
    await fake.post(second, ANN, "second channel")
    await wait_for(lambda: [c.status for c in fake.of("POST", "/messages")].count(429) == 2, 60, "two 429s")
    limited_at = max(c.at for c in fake.of("POST", "/messages") if c.status == 429)
    await fake.post(world.dm, ANN, "a third conversation")
    await wait_for(lambda: fake.view(world.dm.id), 60, "the third channel's reply")
    (third,) = [c for c in fake.of("POST", f"/channels/{world.dm.id}/messages") if c.status == 200]
    assert third.at - limited_at < 4.0, "the third channel waited out the others' 429s"
    await wait_for(lambda: fake.view(world.free.id) and fake.view(second.id), 60, "the limited replies")
    for channel in (world.free, second):
        sends = fake.of("POST", f"/channels/{channel.id}/messages")
        assert [c.status for c in sends] == [429, 200]
        assert sends[1].at - sends[0].at >= 4.0 - 0.05, "each limited channel honoured its own wait"
