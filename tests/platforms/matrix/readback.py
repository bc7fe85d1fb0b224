"""Conversations of the Matrix tests (rooms and their threads, and what was asked in each), and
reading them back from the server: was every question answered exactly once, in its thread, in
order?"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from matrix.client import Person, Shown, shown_by
from matrix.harness import People, echo_of, joined

MARKER = "(possible repeat) "
RESUME_NOTICE = "The gateway restarted while answering this message"


@dataclass
class Conversation:
    """One room, or one thread of a room, and what was asked in it (event id, text) in order."""

    room: str
    asker: Person
    thread: str | None = None
    asked: list[tuple[str, str]] = field(default_factory=list)


def answers_by_question(shown: list[Shown]) -> dict[str, list[Shown]]:
    found: dict[str, list[Shown]] = defaultdict(list)
    for message in shown:
        if message.reply_to:
            found[message.reply_to].append(message)
    return found


async def unanswered(conversations: list[Conversation], bot_id: str) -> list[str]:
    """Questions with no final answer yet (a preview still shows the cursor)."""
    missing = []
    for room in {c.room for c in conversations}:
        asker = next(c.asker for c in conversations if c.room == room)
        found = answers_by_question(shown_by(await asker.events(room), bot_id))
        for conv in (c for c in conversations if c.room == room):
            for event_id, text in conv.asked:
                finals = [m for m in found.get(event_id, []) if m.text.endswith(echo_of(text))]
                if not finals:
                    missing.append(text)
    return missing


async def check_answered_once(conversations: list[Conversation], bot_id: str, kills: int = 0) -> int:
    """Every question answered by exactly one unmarked final (or, after a kill cut a send short,
    one marked as a possible repeat), in the question's thread, in order; returns the repeats."""
    repeats = 0
    for room in {c.room for c in conversations}:
        asker = next(c.asker for c in conversations if c.room == room)
        shown = shown_by(await asker.events(room), bot_id)
        found = answers_by_question(shown)
        position = {m.event_id: i for i, m in enumerate(shown)}
        for conv in (c for c in conversations if c.room == room):
            firsts = []
            for event_id, text in conv.asked:
                answers = [m for m in found.get(event_id, []) if not m.text.startswith(RESUME_NOTICE)]
                plain = [m for m in answers if m.text == echo_of(text)]
                marked = [m for m in answers if m.text == MARKER + echo_of(text)]
                assert answers, f"{text!r} was never answered"
                assert len(answers) == len(plain) + len(marked), (
                    f"{text!r}: unexpected {[m.text for m in answers]}"
                )
                assert len(plain) <= 1 and len(marked) <= kills, f"{text!r} answered {len(answers)} times"
                assert all(m.thread == conv.thread for m in answers), f"{text!r} answered outside its thread"
                repeats += len(answers) - 1
                firsts.append(min(position[m.event_id] for m in answers))
            assert firsts == sorted(firsts), f"{room} {conv.thread}: answered out of order"
    return repeats


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
