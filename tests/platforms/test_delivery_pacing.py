"""At saturation the outbox sends at the budget's pace, never idle while a reply is due (issue 33).

Item 2: a row more than a second from its rate slot went back to ``pending`` and waited for
the 1-s poll, so the platform sat idle with replies due (Slack: 1.76 s of nothing between 16
and 27 posts; Discord: 1-s stalls in a first-contact burst). Thirty conversations write twice
at once through the real gateway and the unmodified client library against the fake Slack and
the fake Discord, the gateway's rate set to 10 calls/s (so thirty replies outrun it), and the
delivery horizon forced to 0.5 s in a second run so rows also go back to ``pending`` and must be
reclaimed by their timers. From the fake's call log: no 1-s window over the rate, no channel
over one message a second, and no gap longer than one spacing (plus the loop's slack, ``stamp_slack``)
while some reply was due and the platform's window had room. The Telegram double's run is in
``test_telegram_pacing.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from discord_fake.harness import ANN, GUILD_ID, World, connected, discord_config, fake, run, wait_for, world
from discord_fake.harness import echo_of as discord_echo
from discord_fake.server import FakeDiscord
from msgspec.structs import replace
from pacing_log import WriterCommits, busiest, fullest, idle_gaps, stalled_at, stamp_slack
from slack_fake import FakeSlack, message_event
from slack_fake.gateway import ENV, echo_of, slack_config

pytestmark = pytest.mark.usefixtures("dense_lag_samples")

__all__ = ["fake", "run", "world"]
RATE = 10
CHATS = 30
INLINE = [None, 0.5]
IDS = ["default", "put_back_beyond_half_a_second"]


def _check(
    gateway: Any, times: list[float], replies: dict[str, list[float]], start: float, commits: WriterCommits
) -> None:
    slack = stamp_slack(gateway)
    assert busiest(times, 1.0 - slack) <= RATE, (
        f"{busiest(times, 1.0)} calls within one second; slack {slack:.3f} s; "
        f"the fullest window's stamps: {fullest(times, 1.0 - slack, start)}"
    )
    for chat, sends in replies.items():
        assert len(sends) == 2 and sends[1] - sends[0] >= 1.0 - slack, (chat, sends)
    idle = idle_gaps(times, replies, start, 1.0, 1.0 / RATE + slack, RATE)
    assert idle == [], (
        f"idle gaps (at, length) with a reply due: {idle}\n{stalled_at(gateway.store.path, idle, start)}\n"
        f"{commits.during(idle, start)}"
    )


def _limit(gateway: Any, inline: float | None) -> None:
    if inline is not None:
        gateway.delivery.settings = replace(gateway.delivery.settings, max_inline_wait=inline)


@pytest.mark.parametrize("inline", INLINE, ids=IDS)
async def test_slack_sends_at_its_rate_with_no_idle_gap_while_a_reply_is_due(
    fake_slack: FakeSlack,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    inline: float | None,
    writer_commits: WriterCommits,
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    from chatgate.app.gateway import Gateway

    config = slack_config(fake_slack, tmp_path, delivery={"rate_limits": {"slack": {"per_second": RATE}}})
    gateway: Any = Gateway(config, tmp_path / "state")
    await gateway.start()
    try:
        _limit(gateway, inline)
        await fake_slack.socket.connected.wait()
        channels = [f"D{300 + n}" for n in range(CHATS)]
        start = asyncio.get_running_loop().time()
        for round_ in range(2):
            for channel in channels:
                await fake_slack.push_event(message_event(channel, "U1", f"s{round_} {channel}"))

        def posts(channel: str) -> list[float]:
            return [
                c.at
                for c in fake_slack.calls
                if c.method == "chat.postMessage" and c.status == 200 and c.params.get("channel") == channel
            ]

        await fake_slack.wait_for(
            lambda: all(len(posts(c)) >= 2 for c in channels), timeout=60, what="two replies in every channel"
        )
        for channel in channels:
            assert [m.text for m in fake_slack.view(channel)] == [
                echo_of(f"s{r} {channel}") for r in range(2)
            ]
        calls = [c.at for c in fake_slack.calls if c.method.startswith(("chat.", "assistant."))]
        _check(gateway, calls, {c: posts(c) for c in channels}, start, writer_commits)
        assert not [c for c in fake_slack.calls if c.status == 429]
    finally:
        await gateway.stop()


@pytest.mark.parametrize("inline", INLINE, ids=IDS)
async def test_discord_sends_at_its_rate_with_no_idle_gap_while_a_reply_is_due(
    fake: FakeDiscord,
    world: World,
    run: Any,
    tmp_path: Path,
    inline: float | None,
    writer_commits: WriterCommits,
) -> None:
    guild = fake.guilds[GUILD_ID]
    channels = [fake.channel(guild, f"17000000000000{n:05d}", name=f"c{n}", topic=None) for n in range(CHATS)]
    config = discord_config(
        fake,
        world,
        tmp_path,
        discord={"free_response_channels": [c.id for c in channels]},
        delivery={"rate_limits": {"discord": {"per_second": RATE}}},
    )
    gateway = await run(config)
    _limit(gateway, inline)
    await connected(fake)
    fake.channel_budget = (5, 5.0)  # Discord's documented 5 messages per 5 s per channel
    start = asyncio.get_running_loop().time()
    for round_ in range(2):
        for channel in channels:
            await fake.post(channel, ANN, f"d{round_} {channel.id}")

    def sends(channel_id: str) -> list[float]:
        path = f"/channels/{channel_id}/messages"
        return [c.at for c in fake.calls if c.method == "POST" and c.path.endswith(path) and c.status < 400]

    await wait_for(lambda: all(len(sends(c.id)) >= 2 for c in channels), 60, "two replies in every channel")
    for channel in channels:
        expected = [discord_echo(f"d{r} {channel.id}") for r in range(2)]
        assert [m.content for m in fake.view(channel.id) if m.content in expected] == expected
    calls = [c.at for c in fake.calls if "/channels/" in c.path and c.method in ("POST", "PATCH", "DELETE")]
    _check(gateway, calls, {c.id: sends(c.id) for c in channels}, start, writer_commits)
    assert fake.violations == []
