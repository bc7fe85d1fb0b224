"""Every reply that runs longer than the preview interval shows a preview, within the budget.

Issue 33, item 3: a preview was skipped whenever another call held the next platform slot
(Slack's 20 calls/s puts 50 ms between calls, Telegram's 30/s 33 ms), and 37 of 100
three-second Slack replies showed nothing until their final. A preview now books the next
free slot and shows the newest text when it comes. Twenty conversations stream a ~4 s
reply each at once, through the real gateway and the unmodified client library against
the fake Slack, and against the Telegram Bot API double (on main, 18 and 17 of 20 showed
nothing before the final). Every check reads the fake's call log (arrival times), never a
timer around our code. The fake and the gateway share one event loop, so a window check
allows how far that loop fell behind in any second (``pacing_log.stamp_slack``).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from pacing_log import stamp_slack
from slack_fake import FakeSlack, message_event
from slack_fake.gateway import ENV, echo_of, slack_config
from slack_fake.webapi import Call
from telegram_double import BotApiDouble, Gateways, User, busiest, private, telegram_config
from telegram_double import echo_of as tg_echo_of

pytestmark = pytest.mark.usefixtures("dense_lag_samples")

CHATS = 20
SLOW = {"echo": {"chunk_delay_ms": 150, "chunk_chars": 3}}
TEXT = "a question whose answer streams for about three seconds, long enough for a preview"
THREAD = "1700000000.000500"
MESSAGES = ("chat.startStream", "chat.appendStream", "chat.stopStream", "chat.postMessage", "chat.update")
"""Calls that are messages to the channel: each spends the channel's one-a-second budget."""
PLATFORM_RATE = 20


def _channel_calls(fake: FakeSlack, channel: str) -> list[Call]:
    return [c for c in fake.calls if c.method in MESSAGES and c.params.get("channel") == channel]


async def test_every_multi_second_reply_shows_a_preview_before_its_final_within_the_limits(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    gateway: Any = await gateways.start(slack_config(fake_slack, tmp_path, agent=SLOW))
    await fake_slack.socket.connected.wait()
    channels = [f"D{100 + n}" for n in range(CHATS)]
    for channel in channels:
        await fake_slack.push_event(message_event(channel, "U1", f"{TEXT} {channel}", thread_ts=THREAD))

    def sealed() -> bool:
        return all(
            [(m.text, m.streaming) for m in fake_slack.view(c)] == [(echo_of(f"{TEXT} {c}"), False)]
            for c in channels
        )

    await fake_slack.wait_for(sealed, timeout=90, what="every reply sealed")

    without_preview = []
    for channel in channels:
        methods = [c.method for c in _channel_calls(fake_slack, channel) if c.status == 200]
        if methods[0] != "chat.startStream" or methods[-1] != "chat.stopStream":
            without_preview.append((channel, methods))
    assert without_preview == [], f"{len(without_preview)} of {CHATS} showed nothing before the final"

    slack = stamp_slack(gateway)
    for channel in channels:  # one channel: one message a second (Slack's chat.postMessage limit)
        times = [c.at for c in _channel_calls(fake_slack, channel)]
        assert all(b - a >= 1.0 - slack for a, b in itertools.pairwise(times)), (channel, times)
    budgeted = [c.at for c in fake_slack.calls if c.method in MESSAGES or c.method.startswith("assistant.")]
    assert busiest(budgeted, 1.0 - slack) <= PLATFORM_RATE, f"{busiest(budgeted, 1.0)} calls within a second"
    assert not [c for c in fake_slack.calls if c.status == 429]


async def test_every_multi_second_telegram_reply_shows_an_edited_preview_before_its_final(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    """The same on Telegram (30 calls/s, one message a second per chat): a preview is a message
    with a cursor, and the final edits it, so a reply with a preview has an edit."""
    users = [User(7700 + n, f"U{n}") for n in range(CHATS)]
    config = telegram_config(
        double, tmp_path, telegram={"allow_users": [str(u.id) for u in users]}, agent=SLOW
    )
    gateway: Any = await gateways.start(config)
    for user in users:
        await double.push_message(private(user), user, f"{TEXT} {user.id}")

    def answered() -> bool:
        return all([m.text for m in double.view(u.id)] == [tg_echo_of(f"{TEXT} {u.id}")] for u in users)

    await double.wait_for(answered, timeout=90, what="every reply")
    calls = [c for c in double.chat_calls() if c.method != "sendChatAction"]
    without_preview = []
    for user in users:
        methods = [c.method for c in calls if c.chat_id == user.id and c.status == 200]
        if methods[:2] != ["sendMessage", "editMessageText"]:
            without_preview.append((user.id, methods))
    assert without_preview == [], f"{len(without_preview)} of {CHATS} showed nothing before the final"

    slack = stamp_slack(gateway)
    for user in users:
        times = [c.at for c in calls if c.chat_id == user.id]
        assert all(b - a >= 1.0 - slack for a, b in itertools.pairwise(times)), (user.id, times)
    assert busiest([c.at for c in double.chat_calls()], 1.0 - slack) <= 30
    assert not double.chat_calls(ok=False)
