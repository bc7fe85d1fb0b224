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
from matrix.harness import People, joined, matrix_config, wait_for
from matrix.readback import Conversation, check_answered_once, unanswered

pytestmark = pytest.mark.slow
ROOMS = 10
PER_CONVERSATION = 10


async def make_conversations(people: People, bot_id: str, rooms: int) -> list[Conversation]:
    """``rooms`` rooms, each with a thread: the room's asker and the thread's asker differ."""
    conversations = []
    for n in range(rooms):
        ann, bob = people.person(f"ann{n}_"), people.person(f"bob{n}_")
        room = await ann.create_room(invite=[bot_id, bob.user_id], name=f"Room {n}")
        await bob.join(room)
        await joined(ann, room, bot_id)
        root = await ann.say(room, f"thread {n} starts here (not for the bot)")
        conversations += [Conversation(room, ann), Conversation(room, bob, thread=root)]
    return conversations


async def ask(conv: Conversation, bot_id: str, label: str, count: int) -> None:
    for i in range(count):
        text = f"{label} {i} in {conv.room[-6:]}{'/t' if conv.thread else ''}"
        event_id = await conv.asker.say(conv.room, text, mention=bot_id, thread=conv.thread)
        conv.asked.append((event_id, text))


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
