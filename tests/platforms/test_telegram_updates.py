"""What each Telegram update becomes: sources, identities and media kept; bad updates skipped, not fatal."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from telegram_double import (
    BOT_ID,
    TOKEN,
    BotApiDouble,
    Chat,
    Gateways,
    User,
    echo_of,
    private,
    telegram_config,
)

from chatgate.domain.inbound import Inbound
from chatgate.engine.intake import MAX_UNEXPECTED_TRIES as MAX_UNEXPECTED_FAILURES
from chatgate.engine.intake import EngineIntake
from chatgate.engine.ports import Admitted
from chatgate.platforms.telegram.adapter import TelegramAdapter
from chatgate.platforms.telegram.section import TelegramSection
from chatgate.store.sqlite import SqliteStore

ADA = User(8001, "Ada", "Lovelace", username="ada")
NOLAST = User(8002, "", username="only_username")
FORUM = Chat(-1006000000001, "supergroup", title="Forum HQ", is_forum=True)
GROUP = Chat(-1006000000002, "group", title="Old group")


def _inbox(db: Path) -> dict[int, dict[str, Any]]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT delivery_id, inbound_json, session_key FROM inbox").fetchall()
    finally:
        conn.close()
    found = {}
    for delivery_id, inbound, key in rows:
        bot, _, update = delivery_id.partition(":")
        assert bot == str(BOT_ID)
        found[int(update)] = {**json.loads(inbound), "session_key": key}
    return found


async def test_messages_keep_their_source_identities_captions_and_media(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    users = [ADA.id, NOLAST.id]
    # Decoding only: the files named here are not the double's, so fetching stays off.
    config = telegram_config(double, tmp_path, telegram={"allow_users": users}, media={"enabled": False})
    gateway = await gateways.start(config)
    photo = [
        {"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 1000},
        {"file_id": "large", "file_unique_id": "l", "width": 1280, "height": 960, "file_size": 90000},
    ]
    dm_photo, dm_photo_msg = await double.push_message(
        private(ADA), ADA, None, caption="look at this", photo=photo, reply_to=1
    )
    document = {
        "file_id": "doc1", "file_unique_id": "d", "file_name": "report.pdf",
        "mime_type": "application/pdf", "file_size": 12345,
    }  # fmt: skip
    group_doc, _ = await double.push_message(GROUP, NOLAST, None, document=document)
    voice = {
        "file_id": "voice1",
        "file_unique_id": "v",
        "duration": 3,
        "mime_type": "audio/ogg",
        "file_size": 999,
    }
    topic_voice, _ = await double.push_message(FORUM, ADA, None, voice=voice, topic=11)
    topic_reply, _ = await double.push_message(FORUM, ADA, "quoting", topic=11, reply_to=5)
    await double.wait_for(lambda: len(double.all_sent()) == 4)
    inbox = _inbox(gateway.state_dir / "chatgate.db")

    first = inbox[dm_photo]
    assert first["text"] == "look at this"
    assert first["message_ref"] == str(dm_photo_msg)
    assert first["reply_to"] == "1"
    assert first["attachments"] == [
        {"kind": "photo", "ref": "large", "mime": "image/jpeg", "name": None, "size": 90000}
    ]
    assert first["source"]["chat_type"] == "dm"
    assert first["source"]["user_name"] == "Ada Lovelace"
    assert first["source"]["chat_name"] is None
    assert first["session_key"] == f"agent:main:telegram:dm:{ADA.id}"

    doc = inbox[group_doc]
    assert doc["text"] == ""
    assert doc["attachments"] == [
        {"kind": "document", "ref": "doc1", "mime": "application/pdf", "name": "report.pdf", "size": 12345}
    ]
    assert doc["source"]["chat_type"] == "group"
    assert doc["source"]["user_name"] == "only_username"
    assert doc["source"]["chat_name"] == "Old group"
    assert doc["session_key"] == f"agent:main:telegram:group:{GROUP.id}:{NOLAST.id}"

    in_topic = inbox[topic_voice]
    assert in_topic["attachments"] == [
        {"kind": "voice", "ref": "voice1", "mime": "audio/ogg", "name": None, "size": 999}
    ]
    assert in_topic["source"]["chat_type"] == "thread"
    assert in_topic["source"]["chat_id"] == str(FORUM.id)
    assert in_topic["source"]["thread_id"] == "11"
    assert in_topic["source"]["chat_name"] == "Forum HQ"
    assert in_topic["reply_to"] is None, "the topic's creation message is no quote"
    assert in_topic["session_key"] == f"agent:main:telegram:thread:{FORUM.id}:11"
    assert inbox[topic_reply]["reply_to"] == "5"
    assert [m.thread_id for m in double.view(FORUM.id)] == [11, 11], "replies left the topic"
    labels = await gateway.store.chat_labels("telegram", None, str(FORUM.id))
    assert labels.chat_name == "Forum HQ"


async def test_unknown_and_malformed_updates_are_logged_skipped_and_acknowledged(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chatgate.platforms.telegram")
    gateway = await gateways.start(telegram_config(double, tmp_path, telegram={"allow_users": [ADA.id]}))
    unknown = await double.push_raw({"business_future_thing": {"id": 1, "what": "not known to us"}})
    malformed = await double.push_raw({"message": {"message_id": "not-a-number", "chat": "nope"}})
    service = await double.push_raw(
        {"message": {**double.message_json(GROUP, ADA), "new_chat_members": [ADA.json()]}}
    )
    _, good_id = await double.push_message(private(ADA), ADA, "still listening?")
    last = double.next_update_id - 1

    await double.wait_for(lambda: len(double.view(ADA.id)) == 1, what="the good message answered")
    await double.wait_for(lambda: double.confirmed_below == last + 1, what="every update acknowledged")
    assert double.view(ADA.id)[0].text == echo_of("still listening?")
    assert double.view(ADA.id)[0].reply_to == good_id
    skipped = " ".join(r.getMessage() for r in caplog.records if "skipped Telegram update" in r.getMessage())
    for update_id in (unknown, malformed, service):
        assert f"update {update_id}" in skipped, f"update {update_id} was not logged as skipped"
    assert "malformed" in skipped and "business_future_thing" in skipped
    assert set(_inbox(gateway.state_dir / "chatgate.db")) == {last}
    assert gateway.adapters["telegram"].state().connected


async def test_the_adapter_reports_disconnected_while_the_api_is_down_and_recovers(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    gateway = await gateways.start(telegram_config(double, tmp_path, telegram={"allow_users": [ADA.id]}))
    await double.wait_for(lambda: double.get_updates_calls >= 1)
    assert gateway.adapters["telegram"].state().connected
    port = double.port
    await double.stop()
    deadline = time.monotonic() + 30
    while gateway.adapters["telegram"].state().connected:  # the poll in flight fails once the server is gone
        assert time.monotonic() < deadline, "still reported connected with the API down"
        await asyncio.sleep(0.05)
    assert (
        "<token>" not in gateway.adapters["telegram"].state().detail
        and TOKEN not in gateway.adapters["telegram"].state().detail
    )
    assert await gateway.ready() != []

    revived = BotApiDouble()
    await revived.start(port)
    try:
        await revived.push_message(private(ADA), ADA, "back?")
        await revived.wait_for(lambda: len(revived.view(ADA.id)) == 1, timeout=60)
        assert gateway.adapters["telegram"].state().connected
        assert await gateway.ready() == []
    finally:
        await revived.stop()


class _FlakySink:
    """An InboundSink (the adapter's seam to admission) that fails on one text with a bug-like error."""

    def __init__(self, poison: str) -> None:
        self.poison = poison
        self.tries = 0
        self.admitted: list[Inbound] = []

    async def admit(self, inbound: Inbound) -> Admitted:
        if inbound.text == self.poison:
            self.tries += 1
            raise RuntimeError("a bug in admission")
        self.admitted.append(inbound)
        return Admitted(new=True, seq=len(self.admitted), session_key="k")

    async def make_durable(self) -> None:
        """Nothing here is relaxed: each admission above is only a list append."""


async def test_an_update_that_keeps_failing_unexpectedly_is_retried_then_skipped_without_stopping_intake(
    double: BotApiDouble, tmp_path: Path
) -> None:
    store = SqliteStore(tmp_path / "cursors.db")
    await store.open()
    sink = _FlakySink("poison")
    intake = EngineIntake(sink, store)
    section = TelegramSection(api_base=double.base, poll_timeout_seconds=5)
    adapter = TelegramAdapter(section, TOKEN, store, intake)
    await adapter.start()
    try:
        poison, _ = await double.push_message(private(ADA), ADA, "poison")
        await double.push_message(private(ADA), ADA, "fine")
        await double.wait_for(lambda: double.confirmed_below == double.next_update_id, timeout=30)
        assert sink.tries == MAX_UNEXPECTED_FAILURES
        assert [i.text for i in sink.admitted] == ["fine"]
        assert await store.get_cursor(f"telegram:{BOT_ID}:offset") == str(poison + 2)
    finally:
        adapter.stop_intake()
        await adapter.aclose()
        await store.close()


def test_an_update_key_named_like_our_own_slot_is_an_unsupported_kind_not_decoded() -> None:
    from chatgate.platforms.telegram.models import parse_update  # the unit beside the double's tests

    assert parse_update({"update_id": 5, "others": None}).other_kinds() == []
    assert parse_update({"update_id": 6, "others": {"x": 1}, "poll": {"id": "p"}}).other_kinds() == [
        "others",
        "poll",
    ]
