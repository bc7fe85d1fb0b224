"""A real gateway on a real Synapse, spoken to by a second real client: a DM, a room where only
mentions are answered, a thread, a reply, an invite policy; every answer read back from the
server (its text after the last edit, and its ``m.relates_to``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from matrix.client import shown_by
from matrix.conftest import Gateways
from matrix.harness import People, echo_of, joined, matrix_config, wait_for

pytestmark = pytest.mark.slow


async def test_a_dm_is_answered_as_a_reply_and_the_streamed_preview_ends_as_the_exact_final(
    people: People, gateways: Gateways, tmp_path: Path
) -> None:
    bot, ann = people.account("bot"), people.person("ann")
    config = matrix_config(people.server, bot, tmp_path, agent={"echo": {"chunk_delay_ms": 150}})
    await gateways.start(config, bot)
    room = await ann.create_room(invite=[bot.user_id], direct=True)
    await joined(ann, room, bot.user_id)
    asked = await ann.say(room, "hello there, this is a longer message so the echo streams in pieces")

    async def answered() -> list:
        return [s for s in shown_by(await ann.events(room), bot.user_id) if s.reply_to == asked]

    [answer] = await wait_for(answered, 30, "the answer")
    await wait_for(lambda: _final(ann, room, bot.user_id, asked), 30, "the final edit")
    [answer] = await answered()
    assert answer.text == echo_of("hello there, this is a longer message so the echo streams in pieces")
    assert answer.edits >= 1, "the reply streamed as edits of one message"
    assert answer.thread is None


async def _final(ann, room, bot_id, asked) -> bool:  # type: ignore[no-untyped-def]
    shown = [s for s in shown_by(await ann.events(room), bot_id) if s.reply_to == asked]
    return bool(shown) and not shown[0].text.endswith("▍")


async def test_in_a_room_only_mentions_are_answered_and_a_thread_is_answered_in_the_thread(
    people: People, gateways: Gateways, tmp_path: Path
) -> None:
    bot, ann, bob = people.account("bot"), people.person("ann"), people.person("bob")
    await gateways.start(matrix_config(people.server, bot, tmp_path), bot)
    room = await ann.create_room(invite=[bot.user_id, bob.user_id], name="Planning")
    await bob.join(room)
    await joined(ann, room, bot.user_id)
    await ann.say(room, "just talking among people")
    root = await ann.say(room, "question one", mention=bot.user_id)
    in_thread = await bob.say(room, "a follow-up in the thread", mention=bot.user_id, thread=root)

    async def answers() -> dict:
        shown = shown_by(await ann.events(room), bot.user_id)
        return {s.reply_to: s for s in shown if not s.text.endswith("▍")}

    found = await wait_for(lambda: _both(answers, root, in_thread), 30, "both answers")
    assert found[root].text == echo_of("question one") and found[root].thread is None
    assert found[in_thread].text == echo_of("a follow-up in the thread")
    assert found[in_thread].thread == root, "the thread's answer is in the thread"
    shown = shown_by(await ann.events(room), bot.user_id)
    assert len(shown) == 2, [s.text for s in shown]  # the unaddressed message got nothing


async def _both(answers, root, in_thread):  # type: ignore[no-untyped-def]
    found = await answers()
    return found if root in found and in_thread in found else None
