"""200 messages over 20 conversations (10 rooms and a thread in each), sent by real clients
while a real gateway answers: each is answered exactly once, in its thread, in order, and
the server shows it so."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from matrix.conftest import Gateways
from matrix.harness import People, matrix_config, wait_for
from matrix.readback import ask, check_answered_once, make_conversations, unanswered

pytestmark = pytest.mark.slow
ROOMS = 10
PER_CONVERSATION = 10


@pytest.mark.timeout(300)
async def test_200_messages_over_20_rooms_and_threads_are_each_answered_exactly_once(
    people: People, gateways: Gateways, tmp_path: Path
) -> None:
    bot = people.account("bot")
    gateway = await gateways.start(matrix_config(people.server, bot, tmp_path), bot)
    conversations = await make_conversations(people, bot.user_id, ROOMS)
    started = time.monotonic()
    await asyncio.gather(*(ask(c, bot.user_id, "load", PER_CONVERSATION) for c in conversations))

    async def done() -> bool:
        return not await unanswered(conversations, bot.user_id)

    await wait_for(done, 180, "all 200 answers", every=1.0)
    took = time.monotonic() - started
    print(f"\n200 Matrix messages over 20 conversations answered in {took:.1f}s")
    assert await check_answered_once(conversations, bot.user_id) == 0
    db = sqlite3.connect(gateway.state_dir / "chatgate.db")
    try:
        ids = [r[0] for r in db.execute("SELECT delivery_id FROM inbox WHERE transport = 'matrix'")]
        token = db.execute("SELECT value FROM cursors WHERE name = ?", (f"matrix:{bot.user_id}:next_batch",))
        stored = token.fetchone()
    finally:
        db.close()
    assert len(ids) == len(set(ids)) == ROOMS * 2 * PER_CONVERSATION
    assert stored is not None and stored[0]
