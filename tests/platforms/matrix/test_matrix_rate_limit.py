"""``M_LIMIT_EXCEEDED`` from a real Synapse: the bot's account is held to one message a second
(``override_ratelimit``), four people ask at once, and every answer still arrives once. Each
429 becomes a ``RetryLater`` with the homeserver's ``retry_after_ms``, which pauses the whole
platform in the shared rate budget (a homeserver limits the user, not a room), so the next
call waits for it instead of hammering the server."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import pytest

from matrix.conftest import Gateways
from matrix.harness import People, joined, matrix_config, wait_for
from matrix.readback import Conversation, check_answered_once, unanswered

pytestmark = pytest.mark.slow
ROUND = 0.3
"""Calls refused within this of one another were in flight together."""
TOLERANCE = 0.15
"""The log line comes a little after the answer; the budget's clock a little before."""
WAITS = re.compile(r"outbox row \d+ waits ([\d.]+)s for the platform's rate limit: .*M_LIMIT_EXCEEDED")


@pytest.mark.timeout(180)
async def test_m_limit_exceeded_pauses_the_platform_for_retry_after_and_nothing_is_lost(
    people: People, gateways: Gateways, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chatgate")
    bot = people.account("bot", limit=(1, 1))
    askers = [people.person(f"p{n}_") for n in range(4)]
    await gateways.start(matrix_config(people.server, bot, tmp_path), bot)
    conversations = []
    for person in askers:
        room = await person.create_room(invite=[bot.user_id], direct=True)
        await joined(person, room, bot.user_id)
        conversations.append(Conversation(room, person))

    async def ask(conv: Conversation) -> None:
        for i in range(2):
            text = f"limited {i} from {conv.asker.user_id[1:6]}"
            conv.asked.append((await conv.asker.say(conv.room, text), text))

    await asyncio.gather(*(ask(c) for c in conversations))

    async def done() -> bool:
        return not await unanswered(conversations, bot.user_id)

    await wait_for(done, 120, "every answer despite the limit", every=0.5)
    assert await check_answered_once(conversations, bot.user_id) == 0
    waits = [(r.created, float(m.group(1))) for r in caplog.records if (m := WAITS.search(r.getMessage()))]
    assert waits, "Synapse never answered M_LIMIT_EXCEEDED (the limit did not bite)"
    assert all(0 < w <= 5 for _, w in waits), waits  # the homeserver's retry_after_ms, not a guess
    # Honoured: once a 429 is back, no call goes out before its delay is over. Calls already in
    # flight when it came back may be refused too (a round: within ROUND of each other).
    round_start, paused_until = -1e9, 0.0
    for at, wait in sorted(waits):
        if at < round_start + ROUND:
            continue  # in flight with the round's first call
        assert at >= paused_until - TOLERANCE, f"a call went out {paused_until - at:.2f}s into a pause"
        round_start, paused_until = at, at + wait
