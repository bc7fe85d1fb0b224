"""The Discord adapter's pure parts: the catch-up record, message decoding, command registration."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatgate.domain.commands import CONTROL_COMMANDS
from chatgate.platforms.discord.catchup import MAX_CHANNELS, ChannelBook, snowflake_time
from chatgate.platforms.discord.commands import desired_commands, unchanged
from chatgate.platforms.discord.decode import Addressing, Bad, ChannelInfo, Inbound, decode_message
from chatgate.platforms.kit.skipped import Skipped
from chatgate.store.sqlite import SqliteStore

EPOCH_MS = 1_420_070_400_000
BOT = "900000000000000001"


def snowflake_at(seconds: float, n: int = 0) -> str:
    return str(((int(seconds * 1000) - EPOCH_MS) << 22) | n)


@pytest.fixture
async def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    opened = SqliteStore(tmp_path / "chatgate.db")
    await opened.open()
    yield opened
    await opened.close()


def test_a_snowflake_carries_its_time() -> None:
    now = time.time()
    assert abs(snowflake_time(snowflake_at(now, 5)) - now) < 0.002


async def test_the_record_survives_a_reopen_keeps_only_recent_channels_and_never_goes_back(
    store: SqliteStore, tmp_path: Path
) -> None:
    now = time.time()
    book = ChannelBook(store, "discord:channels", keep_hours=24)
    book.note("c1", snowflake_at(now - 60))
    book.note("c1", snowflake_at(now - 3600))  # older: ignored
    book.note("c2", snowflake_at(now - 48 * 3600))  # outside catch_up_hours
    book.note("c3", "not-a-snowflake")
    await book.flush()
    again = ChannelBook(store, "discord:channels", keep_hours=24)
    await again.load()
    assert again.recent() == [("c1", snowflake_at(now - 60))]


async def test_a_new_channel_is_recorded_from_just_before_its_first_message(store: SqliteStore) -> None:
    book = ChannelBook(store, "discord:channels", keep_hours=1)
    first = snowflake_at(time.time())
    await book.start_channel("c9", first)
    stored = json.loads(await store.get_cursor("discord:channels") or "{}")
    assert stored == {"c9": str(int(first) - 1)}


async def test_the_record_is_bounded(store: SqliteStore) -> None:
    book = ChannelBook(store, "discord:channels", keep_hours=24)
    now = time.time()
    for i in range(MAX_CHANNELS + 10):
        book.note(f"c{i}", snowflake_at(now - i))
    await book.flush()
    assert len(json.loads(await store.get_cursor("discord:channels") or "{}")) == MAX_CHANNELS


async def test_an_unreadable_record_is_a_fresh_start(store: SqliteStore) -> None:
    await store.set_cursor("discord:channels", "{not json")
    book = ChannelBook(store, "discord:channels", keep_hours=24)
    await book.load()
    assert book.recent() == []


GUILD = ChannelInfo("c1", 0, "g1", "Guild", "general", "topic")
RULES = Addressing(BOT, require_mention=True)


def _message(**over: object) -> dict[str, object]:
    base: dict[str, object] = {"id": "5", "channel_id": "c1", "content": "hi", "type": 0,
                               "author": {"id": "u1", "username": "ann"}}  # fmt: skip
    base.update(over)
    return base


def test_messages_not_for_the_bot_are_skipped_and_mentions_stripped() -> None:
    assert isinstance(decode_message(_message(), GUILD, RULES, received_at=0), Skipped)
    assert isinstance(
        decode_message(_message(author={"id": "u2", "bot": True}), GUILD, RULES, received_at=0), Skipped
    )
    assert isinstance(decode_message(_message(type=7), GUILD, RULES, received_at=0), Skipped)  # a join notice
    mentioned = decode_message(
        _message(content=f"<@{BOT}> hello", mentions=[{"id": BOT}]), GUILD, RULES, received_at=0
    )
    assert isinstance(mentioned, Inbound) and mentioned.text == "hello"
    quoted = {"referenced_message": {"author": {"id": BOT}, "content": "earlier"}}
    replied = decode_message(
        _message(**quoted, message_reference={"message_id": "4"}), GUILD, RULES, received_at=0
    )
    assert isinstance(replied, Inbound) and replied.reply_to == "4"
    assert replied.payload["reply_to"] == {"text": "earlier", "author": None, "is_own": True}


def test_allow_channels_filters_by_the_channel_or_a_threads_parent() -> None:
    rules = Addressing(BOT, require_mention=False, allow_channels=frozenset({"p1"}))
    thread = ChannelInfo("t1", 11, "g1", "Guild", "t", None, "p1", "parent")
    assert isinstance(decode_message(_message(channel_id="t1"), thread, rules, received_at=0), Inbound)
    assert isinstance(decode_message(_message(), GUILD, rules, received_at=0), Skipped)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
    max_leaves=8,
)
KEYS = [
    "id",
    "author",
    "content",
    "type",
    "mentions",
    "attachments",
    "message_reference",
    "referenced_message",
]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), JSON), st.booleans())
def test_any_message_shape_decodes_or_is_refused_without_raising(
    data: dict[str, object], valid: bool
) -> None:
    if valid:  # most fields wrong, but an id and an author: the decoder reads on
        data = {**data, "id": "5", "author": {"id": "u1", "global_name": data.get("content")}}
    for rules in (RULES, Addressing(BOT, require_mention=False)):
        result = decode_message(data, GUILD, rules, received_at=0)
        assert isinstance(result, Inbound | Skipped | Bad)


def test_registration_is_skipped_when_the_commands_are_unchanged() -> None:
    wanted = desired_commands()
    assert {c["name"] for c in wanted if c["type"] == 1} == {"ask", *(c.name for c in CONTROL_COMMANDS)}
    stored = [
        {**c, "id": str(i), "application_id": "a", "version": "1"} for i, c in enumerate(reversed(wanted))
    ]
    assert unchanged(stored, wanted)
    assert not unchanged(stored[1:], wanted)
    assert not unchanged([{**stored[-1], "description": "changed"}, *stored[:-1]], wanted)  # a slash command
    remind = next(i for i, c in enumerate(stored) if c["name"] == "remind")
    optional = [{**o, "required": False} for o in stored[remind]["options"]]
    assert not unchanged(
        [*stored[:remind], {**stored[remind], "options": optional}, *stored[remind + 1 :]], wanted
    )
