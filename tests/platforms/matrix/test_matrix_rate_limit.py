"""``M_LIMIT_EXCEEDED`` from a real Synapse: the bot's account is held to one message a second
(``override_ratelimit``), four people ask at once, and every answer still arrives once. Each
429 becomes a ``RetryLater`` with the homeserver's ``retry_after_ms``, which pauses the whole
platform in the shared rate budget (a homeserver limits the user, not a room), so the next
call waits for it instead of hammering the server.

Each send is stamped as it leaves (a pass-through recorder on ``MatrixApi.call``: the request
still goes to Synapse), so the check is on departures, not on when Synapse answered: a call a
loaded homeserver answers late left before the pause and was never inside it."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest

from matrix.conftest import Gateways
from matrix.harness import People, joined, matrix_config, wait_for
from matrix.readback import Conversation, check_answered_once, unanswered

pytestmark = pytest.mark.slow
TOLERANCE = 0.15
"""The budget takes its clock a moment before the log line; a timer may fire a tick early."""
WAITS = re.compile(r"outbox row \d+ waits ([\d.]+)s for the platform's rate limit: .*M_LIMIT_EXCEEDED")


@pytest.mark.timeout(180)
async def test_m_limit_exceeded_pauses_the_platform_for_retry_after_and_nothing_is_lost(
    people: People,
    gateways: Gateways,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from chatgate.platforms.matrix.api import MatrixApi

    caplog.set_level(logging.INFO, logger="chatgate")
    departures: list[float] = []
    call = MatrixApi.call

    async def stamped(api: MatrixApi, method: str, where: str, *args: Any, **kwargs: Any) -> Any:
        if method == "PUT" and "/send/" in where:
            departures.append(time.time())  # the clock of LogRecord.created
        return await call(api, method, where, *args, **kwargs)

    monkeypatch.setattr(MatrixApi, "call", stamped)
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
    # the homeserver's retry_after_ms, not a guess: Synapse says 0 when its bucket refills within the ms
    assert all(0 <= w <= 5 for _, w in waits), waits
    # Honoured: no message leaves after a 429 is taken and before its delay is over. A call that
    # left earlier (in flight, or cleared by the budget before the 429 came back) is not inside.
    early = [
        (round(d - at, 3), wait) for at, wait in waits for d in departures if at < d < at + wait - TOLERANCE
    ]
    assert not early, f"{len(early)} sends left inside a pause (seconds in, pause): {early[:8]}"
    assert len(departures) > len(waits), (departures, waits)  # every refused send was sent again
