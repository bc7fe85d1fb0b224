"""Native Discord intake on the fake Discord: what is for the bot, where replies go, who may talk."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from discord_fake.harness import (
    ANN,
    BOB,
    EVE,
    ROLE_OPS,
    World,
    connected,
    discord_config,
    echo_of,
    fake,
    inbox,
    run,
    wait_for,
    world,
)
from discord_fake.server import FakeDiscord
from discord_fake.state import ANNOUNCEMENT_THREAD, PRIVATE_THREAD, PUBLIC_THREAD

from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.outbound import PREVIEW_CURSOR
from chatgate.store.sqlite.cursors import SqliteCursors
from chatgate.store.sqlite.inbox import SqliteInbox

__all__ = ["fake", "run", "world"]


async def test_a_dm_is_answered_in_the_dm_as_a_reply(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    asked = await fake.post(world.dm, ANN, "hello there")
    await wait_for(lambda: fake.view(world.dm.id), 30, "the reply")
    (answer,) = fake.view(world.dm.id)
    assert answer.content == echo_of("hello there") and answer.reference == asked.id
    (row,) = inbox(tmp_path)
    assert row["session_key"] == f"agent:main:discord:dm:{world.dm.id}"
    assert row["source"]["user_name"] == "Ann G" and row["message_ref"] == asked.id


async def test_guild_messages_need_a_mention_unless_the_channel_is_free(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    await fake.post(world.general, ANN, "just chatting")
    await fake.post(world.general, ANN, "are you there?", mention_bot=True, nick="Annie")
    await fake.post(world.free, BOB, "free talk")
    await wait_for(lambda: fake.view(world.general.id) and fake.view(world.free.id), 30, "two replies")
    assert [m.content for m in fake.view(world.general.id)] == [echo_of("are you there?")]
    assert [m.content for m in fake.view(world.free.id)] == [echo_of("free talk")]
    rows = inbox(tmp_path)
    rows.sort(key=lambda r: r["text"])  # two channels are admitted concurrently
    assert [r["text"] for r in rows] == ["are you there?", "free talk"]
    general = rows[0]["source"]
    assert general["chat_type"] == "group" and general["scope_id"] == "1100000000000000001"
    assert general["user_name"] == "Annie" and general["chat_name"] == "Guild / #general"
    assert general["chat_topic"] == "release talk"
    assert rows[0]["session_key"] == f"agent:main:discord:group:{world.general.id}:{ANN.id}"


@pytest.mark.parametrize("kind", [ANNOUNCEMENT_THREAD, PUBLIC_THREAD, PRIVATE_THREAD])
async def test_threads_key_by_the_thread_with_the_channel_as_parent(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path, kind: int
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    thread = world.threads[kind]
    await fake.post(thread, ANN, "in a thread", mention_bot=True)
    await wait_for(lambda: fake.view(thread.id), 30, "the reply in the thread")
    (row,) = inbox(tmp_path)
    source = row["source"]
    assert (source["chat_type"], source["chat_id"], source["thread_id"]) == ("thread", thread.id, thread.id)
    assert source["parent_chat_id"] == world.general.id
    assert row["session_key"] == f"agent:main:discord:thread:{thread.id}:{thread.id}"


async def test_a_forum_post_created_while_connected_is_a_thread(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    post = await fake.create_thread(world.forum, "1500000000000000099", PUBLIC_THREAD, "how do I x")
    await fake.post(post, BOB, "the post body", mention_bot=True)
    await wait_for(lambda: fake.view(post.id), 30, "the reply in the forum post")
    (row,) = inbox(tmp_path)
    assert row["source"]["parent_chat_id"] == world.forum.id
    assert row["source"]["chat_name"] == "Guild / #help / how do I x"


async def test_strangers_are_refused_and_a_role_lets_a_member_in(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path, discord={"allow_roles": [ROLE_OPS]}))
    await connected(fake)
    await fake.post(world.free, EVE, "let me in")
    await fake.post(world.free, EVE, "with the role", roles=[ROLE_OPS])
    await wait_for(lambda: fake.view(world.free.id), 30, "the reply to the member with the role")
    assert [m.content for m in fake.view(world.free.id)] == [echo_of("with the role")]
    assert [r["text"] for r in inbox(tmp_path)] == ["with the role"]


async def test_a_reply_quotes_and_attachments_are_references(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    first = await fake.post(world.free, ANN, "first")
    await wait_for(lambda: fake.view(world.free.id), 30, "the first reply")
    files = [
        {
            "id": "1",
            "filename": "a.png",
            "url": "https://cdn.example/a.png",
            "content_type": "image/png",
            "size": 1234,
        }
    ]
    await fake.post(world.free, ANN, "see this", reference=first.id, attachments=files)
    await wait_for(lambda: len(fake.view(world.free.id)) == 2, 30, "the second reply")
    row = inbox(tmp_path)[1]
    assert row["reply_to"] == first.id
    assert row["attachments"] == [{"kind": "image", "ref": "https://cdn.example/a.png", "mime": "image/png",
                                   "name": "a.png", "size": 1234}]  # fmt: skip


async def test_a_later_edit_reaches_the_agent_as_an_edit_once(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    message = await fake.post(world.free, ANN, "meet at 5")
    await wait_for(lambda: fake.view(world.free.id), 30, "the first reply")
    await fake.edit(message, "meet at 6")
    await wait_for(lambda: len(fake.view(world.free.id)) == 2, 30, "the reply to the edit")
    fake.gateway.replay_overlap = 20  # the edit is replayed by a RESUME: it is the same edit
    await fake.gateway.drop()
    await wait_for(lambda: fake.gateway.resumes == 1, 60, "the RESUME")
    await fake.post(world.free, ANN, "after")
    await wait_for(lambda: len(fake.view(world.free.id)) == 3, 30, "the reply after the resume")
    assert [m.content for m in fake.view(world.free.id)] == [
        echo_of("meet at 5"),
        echo_of(f"(edited their message {message.id}; it now reads:) meet at 6"),  # domain/edits.py
        echo_of("after"),
    ]
    edit = inbox(tmp_path)[1]
    assert edit["message_ref"] == message.id and edit["payload"]["edit_of"] == message.id


async def test_an_edit_of_a_message_still_waiting_is_answered_once_as_it_now_reads(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    # The first turn takes ~0.8 s (two chunks, 0.4 s each), so the second message waits in the
    # inbox when its edit arrives: the edit replaces its text there (Inbox.admit).
    await run(discord_config(fake, world, tmp_path, agent={"echo": {"chunk_delay_ms": 400}}))
    await connected(fake)
    await fake.post(world.free, ANN, "first")
    await wait_for(lambda: len(inbox(tmp_path)) == 1, 30, "the first message admitted")
    waiting = await fake.post(world.free, ANN, "meet at 5")
    await fake.edit(waiting, "meet at 6")

    def finals() -> list[str]:  # what the channel shows, once no reply is a preview any more
        shown = [m.content for m in fake.view(world.free.id)]
        return [] if any(c.endswith(PREVIEW_CURSOR) for c in shown) else shown

    await wait_for(lambda: len(finals()) == 2, 30, "two final replies")
    await wait_for(lambda: len(inbox(tmp_path)) == 3, 30, "the edit admitted")
    assert [m.content for m in fake.view(world.free.id)] == [echo_of("first"), echo_of("meet at 6")]
    await asyncio.sleep(2.0)  # an edit run as a turn of its own would answer by now
    assert len(fake.view(world.free.id)) == 2


def _rejected(tmp_path: Path) -> list[tuple[str, str]]:
    db = sqlite3.connect(tmp_path / "state" / "chatgate.db")
    try:
        return db.execute("SELECT delivery_id, reason FROM rejected_inbound ORDER BY id").fetchall()
    finally:
        db.close()


async def test_a_deleted_message_is_recorded_and_the_agent_is_not_told(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    message = await fake.post(world.free, ANN, "oops, wrong channel")
    await wait_for(lambda: fake.view(world.free.id), 30, "the reply")
    await fake.gateway.dispatch("MESSAGE_DELETE", {"id": message.id, "channel_id": world.free.id})
    await wait_for(lambda: _rejected(tmp_path), 30, "the deletion recorded")
    [(delivery_id, reason)] = _rejected(tmp_path)
    assert delivery_id == f"{message.id}:delete" and "deleted" in reason
    assert len(inbox(tmp_path)) == 1  # no event for the agent
    assert len(fake.view(world.free.id)) == 1


async def test_status_reactions_show_while_a_message_waits_and_go_when_it_is_answered(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    slow = {"echo": {"chunk_delay_ms": 300}}
    await run(discord_config(fake, world, tmp_path, agent=slow, discord={"status_reactions": True}))
    await connected(fake)
    message = await fake.post(world.free, ANN, "take your time")
    await wait_for(lambda: fake.reactions.get(message.id) == {"👀"}, 30, "the working reaction")
    await wait_for(
        lambda: fake.view(world.free.id) and not fake.view(world.free.id)[0].content.endswith(PREVIEW_CURSOR),
        30,
        "the final reply",
    )
    await wait_for(lambda: fake.reactions.get(message.id) == set(), 30, "the reaction taken away")
    puts = fake.of("PUT", f"/messages/{message.id}/reactions/")
    assert len(puts) == 1  # once per message, not per chunk


async def test_an_event_the_lane_fails_to_queue_is_logged_and_the_connection_stays_up(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The lane is called from inside discord.py's frame reader: an exception there would end the
    gateway connection (and reconnect), so the hook logs it and the next frames go on."""
    gateway = await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    lane = gateway.adapters["discord"].lane
    real_put = lane._put

    def failing_once(channel: str, work: Any) -> None:
        lane._put = real_put
        raise RuntimeError("injected: the lane could not queue this event")

    lane._put = failing_once
    await fake.post(world.free, BOB, "lost to the injected failure")
    await fake.post(world.free, BOB, "after it")
    await wait_for(lambda: fake.view(world.free.id), 30, "the reply to the next message")
    assert [m.content for m in fake.view(world.free.id)] == [echo_of("after it")]
    assert fake.gateway.identifies == 1, "the failure dropped the gateway connection"
    assert any("MESSAGE_CREATE event could not be queued" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("catch_up_hours", [24.0, 0.0])
async def test_a_message_catch_up_reads_back_is_admitted_without_an_fsync_of_its_own(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    catch_up_hours: float,
) -> None:  # fmt: skip
    """A power cut that takes such an admission takes the catch-up position after it too, so the
    next start reads the message back; a new channel's entry is written durably before its first
    message. Not an edit (never read back), nor anything without catch-up."""
    seen: list[tuple[str, str, bool]] = []
    admit, set_cursor = SqliteInbox.admit, SqliteCursors.set_cursor

    async def admitted(self: SqliteInbox, request: AdmitRequest) -> Any:
        seen.append(("admit", request.inbound.text, request.relaxed))
        return await admit(self, request)  # the real admission: only looked at

    async def stored(self: SqliteCursors, name: str, value: str, *, durable: bool = False) -> None:
        if name == "discord:channels" and world.free.id in json.loads(value):
            seen.append(("book", world.free.id, durable))
        await set_cursor(self, name, value, durable=durable)

    monkeypatch.setattr(SqliteInbox, "admit", admitted)
    monkeypatch.setattr(SqliteCursors, "set_cursor", stored)
    await run(discord_config(fake, world, tmp_path, discord={"catch_up_hours": catch_up_hours}))
    await connected(fake)
    first = await fake.post(world.free, ANN, "meet at 5")
    await wait_for(lambda: fake.view(world.free.id), 30, "the first reply")
    await fake.post(world.free, ANN, "bring cake")
    await wait_for(lambda: len(fake.view(world.free.id)) == 2, 30, "the second reply")
    await fake.edit(first, "meet at 6")
    await wait_for(lambda: len(fake.view(world.free.id)) == 3, 30, "the reply to the edit")
    relaxed = catch_up_hours > 0
    admissions = [entry for entry in seen if entry[0] == "admit"]
    assert admissions == [
        ("admit", "meet at 5", relaxed),
        ("admit", "bring cake", relaxed),
        ("admit", "meet at 6", False),
    ]
    if relaxed:  # the channel's entry, durable, before its first message
        assert seen[0] == ("book", world.free.id, True), seen
    assert "replayable" not in inbox(tmp_path)[1]  # it only matters while the event is admitted
