"""A real ``chatgate run`` on the fake Discord, SIGKILLed during a burst and while a reply streams.

The gateway is a subprocess; the fake runs in the test. After each kill the next start
IDENTIFYs afresh (Discord replays nothing to a new process), so what was sent while it was
down, and what it had received but not admitted, comes back only through catch-up.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from discord_fake.harness import ANN, BOB, World, discord_config, echo_of, fake, wait_for, world
from discord_fake.server import FakeDiscord

from support.procs import GatewayProcess

__all__ = ["fake", "world"]
pytestmark = pytest.mark.slow
CURSOR = "▍"
MARKER = "(possible repeat) "
RESUME_NOTICE = "The gateway restarted while answering this message"


def _answers(fake: FakeDiscord, channel_id: str) -> list[str]:
    return [m.content for m in fake.view(channel_id)]


def _each_answered_once(fake: FakeDiscord, world: World, asked: dict[str, list[str]]) -> None:
    for channel_id, texts in asked.items():
        shown = _answers(fake, channel_id)
        plain = Counter(s for s in shown if not s.startswith(MARKER))
        for text in texts:
            # A reply mid-send at a kill may be shown again, marked as a possible repeat; never plain twice.
            assert plain[echo_of(text)] == 1 or (
                plain[echo_of(text)] == 0 and MARKER + echo_of(text) in shown
            ), (
                text,
                shown,
            )
        unmarked = [s for s in shown if not s.startswith((MARKER, RESUME_NOTICE))]
        assert unmarked == [echo_of(t) for t in texts if echo_of(t) in unmarked], "order per channel"


def _config(fake: FakeDiscord, world: World, tmp_path: Path, **agent: Any) -> dict[str, Any]:
    config = discord_config(fake, world, tmp_path, agent={"echo": {"chunk_delay_ms": 5, **agent}})
    del config["http"]
    return config


@pytest.mark.timeout(300)
async def test_a_kill_during_a_burst_and_downtime_lose_nothing_and_answer_nothing_twice(
    fake: FakeDiscord, world: World, tmp_path: Path
) -> None:
    gateway = GatewayProcess(tmp_path, _config(fake, world, tmp_path))
    channels = [world.free, world.dm, world.threads[11]]
    asked: dict[str, list[str]] = {c.id: [] for c in channels}

    async def burst(label: str, count: int) -> None:
        for i in range(count):
            channel = channels[i % len(channels)]
            text = f"{label} {i}"
            asked[channel.id].append(text)
            # One writer per channel, so a channel is one session whose order is checked.
            author = BOB if channel is world.threads[11] else ANN
            await fake.post(channel, author, text, mention_bot=channel is world.threads[11])
            await asyncio.sleep(0.01)

    await gateway.start()
    try:
        await wait_for(
            lambda: fake.gateway.identifies == 1 and fake.gateway.current, 60, "the first IDENTIFY"
        )
        await burst("warm", 3)
        await wait_for(lambda: all(_answers(fake, c.id) for c in channels), 60, "every channel active")
        for round_ in range(2):
            sending = asyncio.create_task(burst(f"burst{round_}", 24))
            started = echo_of(f"burst{round_} ")
            await wait_for(
                lambda s=started: sum(a.startswith(s) for c in channels for a in _answers(fake, c.id)) >= 3,
                60,
                "the burst under way",
            )
            await gateway.kill()
            await sending
            await burst(f"down{round_}", 6)  # sent while no gateway runs
            await gateway.start()
            await wait_for(lambda r=round_: fake.gateway.identifies == r + 2, 60, "a fresh IDENTIFY")
        total = sum(len(t) for t in asked.values())
        try:
            await wait_for(
                lambda: sum(len(_answers(fake, c.id)) for c in channels) >= total, 120, f"{total} answers"
            )
        except AssertionError:
            missing = {
                c: [t for t in texts if echo_of(t) not in _answers(fake, c)] for c, texts in asked.items()
            }
            reads = [c.path for c in fake.calls if "after=" in c.path]
            raise AssertionError(f"unanswered: {missing}; history reads: {reads}") from None
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
    _each_answered_once(fake, world, asked)


@pytest.mark.timeout(300)
async def test_a_kill_mid_stream_leaves_no_preview_behind(
    fake: FakeDiscord, world: World, tmp_path: Path
) -> None:
    gateway = GatewayProcess(tmp_path, _config(fake, world, tmp_path, chunk_delay_ms=150, chunk_chars=2))
    text = ("a long question whose answer streams for several seconds, " * 2).strip()
    await gateway.start()
    try:
        await wait_for(lambda: fake.gateway.current, 60, "IDENTIFY")
        asked = await fake.post(world.free, ANN, text)
        await wait_for(
            lambda: any(m.content.endswith(CURSOR) for m in fake.view(world.free.id)), 90, "a preview"
        )
        (stale,) = [m for m in fake.view(world.free.id) if m.content.endswith(CURSOR)]
        await wait_for(lambda: gateway.recorded_preview() == stale.id, 30, "the recorded preview")
        await gateway.kill()
        await gateway.start()
        await wait_for(lambda: echo_of(text) in _answers(fake, world.free.id), 90, "the re-answer")
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
    shown = fake.view(world.free.id)
    assert not any(m.content.endswith(CURSOR) for m in shown), [m.content for m in shown]
    assert [m.id for m in shown if m.content.startswith(RESUME_NOTICE)] == [stale.id]
    assert [m.content for m in shown].count(echo_of(text)) == 1
    assert all(m.reference == asked.id for m in shown)
