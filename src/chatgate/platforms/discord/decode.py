"""A Discord message (the gateway's MESSAGE_CREATE or a REST history entry) as an ``Inbound``.

Both lanes into the same chat key alike (the relay's text lane, and the interactions
decoded by ``platforms.discord_wire``): a DM is ``dm``, a guild channel ``group``, a thread
(channel type 10, 11 or 12, forum posts included) is ``thread`` with the thread as chat and
thread id and its channel as the parent. The user name follows discord.py's
``display_name`` order (nick, global name, username). Labels are an observation: the
guild and channel names and the topic as the channel cache shows them now.

Whether a message is for the bot at all (a mention, a reply to the bot, a free-response
channel, the channel allowlist) is decided here too: a message that is not is a ``Skipped``,
never admitted and never recorded, like any other talk in a channel the bot can read.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from msgspec.structs import replace

from chatgate.domain.edits import EDIT_OF
from chatgate.domain.inbound import MAX_TEXT_CHARS, Attachment, Inbound
from chatgate.domain.source import ChatType, Source
from chatgate.platforms.kit.skipped import Skipped

PLATFORM = "discord"
TRANSPORT = "discord"
THREAD_TYPES = frozenset({10, 11, 12})
DM_TYPES = frozenset({1, 3})
PERSON_MESSAGE_TYPES = frozenset({0, 19})
"""A plain message and a reply; joins, pins, boosts and the like are not for the agent."""


class ChannelInfo(msgspec.Struct, frozen=True):
    """What the adapter knows of a channel (from discord.py's cache, or ``GET /channels/{id}``)."""

    id: str
    type: int
    guild_id: str | None = None
    guild_name: str | None = None
    name: str | None = None
    topic: str | None = None
    parent_id: str | None = None
    parent_name: str | None = None


class Addressing(msgspec.Struct, frozen=True):
    """Which messages are for the bot (``platforms.discord``)."""

    bot_id: str
    require_mention: bool = True
    free_response_channels: frozenset[str] = frozenset()
    allow_channels: frozenset[str] = frozenset()
    """Empty: every channel the bot can read (DMs are never filtered by channel)."""


class Bad(msgspec.Struct, frozen=True):
    """A message we cannot use (malformed, too long): recorded with its reason."""

    reason: str
    delivery_id: str | None


def delivery_id(channel_id: str, message_id: str) -> str:
    return f"discord:{channel_id}:{message_id}"


def chat_label(channel: ChannelInfo) -> str | None:
    if channel.guild_id is None or channel.type in DM_TYPES:
        return None
    guild = channel.guild_name or channel.guild_id
    if channel.type in THREAD_TYPES:
        return f"{guild} / #{channel.parent_name or channel.parent_id} / {channel.name or channel.id}"
    return f"{guild} / #{channel.name or channel.id}"


def display_name(data: dict[str, Any]) -> str | None:
    member, author = data.get("member"), data.get("author")
    for holder, key in ((member, "nick"), (author, "global_name"), (author, "username")):
        value = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(value, str) and value.strip():
            return value
    return None


def source_of(data: dict[str, Any], channel: ChannelInfo) -> Source:
    author = data["author"]
    thread = channel.type in THREAD_TYPES
    chat_type: ChatType = "thread" if thread else "dm" if channel.guild_id is None else "group"
    return Source(
        platform=PLATFORM,
        chat_id=channel.id,
        chat_type=chat_type,
        user_id=str(author["id"]),
        user_name=display_name(data),
        thread_id=channel.id if thread else None,
        parent_chat_id=channel.parent_id if thread else None,
        scope_id=channel.guild_id,
        chat_name=chat_label(channel),
        chat_topic=None if thread else channel.topic,
    )


def _addressed(data: dict[str, Any], channel: ChannelInfo, rules: Addressing) -> tuple[bool, str]:
    places = {channel.id, channel.parent_id} - {None}
    if channel.guild_id is None:
        return True, ""
    if rules.allow_channels and not places & rules.allow_channels:
        return False, "channel not in platforms.discord.allow_channels"
    if not rules.require_mention or places & rules.free_response_channels:
        return True, ""
    mentions = data.get("mentions")
    people = mentions if isinstance(mentions, list) else []
    mentioned = any(isinstance(u, dict) and str(u.get("id")) == rules.bot_id for u in people)
    quoted = data.get("referenced_message")
    quoted_author = quoted.get("author") if isinstance(quoted, dict) else None
    replied = isinstance(quoted_author, dict) and str(quoted_author.get("id")) == rules.bot_id
    return (mentioned or replied), "" if mentioned or replied else "not addressed to the bot"


def _attachments(data: dict[str, Any]) -> tuple[Attachment, ...]:
    found = []
    items = data.get("attachments")
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        mime = item.get("content_type") if isinstance(item.get("content_type"), str) else None
        size = item.get("size") if isinstance(item.get("size"), int) else None
        kind = "image" if mime and mime.startswith("image/") else "document"
        name = item.get("filename") if isinstance(item.get("filename"), str) else None
        found.append(Attachment(kind=kind, ref=item["url"], mime=mime, name=name, size=size))
    return tuple(found)


def strip_mention(text: str, bot_id: str) -> str:
    return re.sub(rf"<@!?{re.escape(bot_id)}>", "", text).strip()


def written_by_a_bot(data: dict[str, Any], bot_id: str) -> bool:
    """A message of a bot (this one's own replies come back as MESSAGE_CREATE): never for us."""
    author = data.get("author")
    return isinstance(author, dict) and (bool(author.get("bot")) or author.get("id") == bot_id)


def decode_message(
    data: dict[str, Any], channel: ChannelInfo, rules: Addressing, *, received_at: float
) -> Inbound | Skipped | Bad:
    """Never raises on input: a malformed message is ``Bad``, one not for the bot a ``Skipped``."""
    message_id, author = data.get("id"), data.get("author")
    if (
        not isinstance(message_id, str)
        or not isinstance(author, dict)
        or not isinstance(author.get("id"), str)
    ):
        return Bad("message without an id or an author id", None)
    if written_by_a_bot(data, rules.bot_id):
        return Skipped("written by a bot")
    kind = data.get("type", 0)
    if not isinstance(kind, int) or kind not in PERSON_MESSAGE_TYPES:
        return Skipped(f"message type {data.get('type')} is not a person's message")
    addressed, why = _addressed(data, channel, rules)
    if not addressed:
        return Skipped(why)
    content = data.get("content")
    if not isinstance(content, str):
        return Bad("message content is not a string", delivery_id(channel.id, message_id))
    text = strip_mention(content, rules.bot_id)
    if len(text) > MAX_TEXT_CHARS:
        return Bad(
            f"text is {len(text)} characters; the limit is {MAX_TEXT_CHARS}",
            delivery_id(channel.id, message_id),
        )
    reference = data.get("message_reference")
    reply_to = reference.get("message_id") if isinstance(reference, dict) else None
    payload: dict[str, Any] = {}
    quoted = data.get("referenced_message")
    if isinstance(quoted, dict) and isinstance(quoted.get("content"), str):
        found = quoted.get("author")
        who: dict[str, Any] = found if isinstance(found, dict) else {}
        author_name = display_name({"author": who})
        is_own = str(who.get("id")) == rules.bot_id
        payload["reply_to"] = {"text": quoted["content"], "author": author_name, "is_own": is_own}
    return Inbound(
        transport=TRANSPORT,
        delivery_id=delivery_id(channel.id, message_id),
        source=source_of(data, channel),
        text=text,
        message_ref=message_id,
        reply_to=reply_to if isinstance(reply_to, str) else None,
        received_at=received_at,
        attachments=_attachments(data),
        payload=payload,
        observes_labels=True,
    )


def decode_edit(
    data: dict[str, Any], channel: ChannelInfo, rules: Addressing, *, received_at: float
) -> Inbound | Skipped | Bad:
    """A person's edit (MESSAGE_UPDATE with an ``edited_timestamp``) as a new event that says it
    is one: its own delivery id per edit, the edited message as ``message_ref`` and ``payload``
    (``edit_of``: the turn's fold, ``domain/edits.py``, tells the agent it is an edit)."""
    edited = data.get("edited_timestamp")
    if not isinstance(edited, str) or not isinstance(data.get("content"), str):
        return Skipped("an update that is not an edit of the text (an embed, a pin)")
    decoded = decode_message(data, channel, rules, received_at=received_at)
    if not isinstance(decoded, Inbound):
        return decoded
    return replace(
        decoded,
        delivery_id=f"{decoded.delivery_id}:edit:{edited}",
        payload={**decoded.payload, EDIT_OF: decoded.message_ref, "edited_at": edited},
    )
