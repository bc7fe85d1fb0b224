"""Reading a conversation back from the server: was every question answered exactly once, in
its thread, in order?"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from matrix.client import Person, Shown, shown_by
from matrix.harness import echo_of

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
