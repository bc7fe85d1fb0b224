"""A Matrix room event (from /sync or /messages) as an ``Inbound``, a ``Skipped`` or a ``Bad``.

Pure. Where and who: a DM (a room the bot was invited to as direct, or one of two members) is
``dm``; any other room ``group``; a message in a thread (``m.relates_to.rel_type: m.thread``)
is ``thread`` with the room as chat and parent and the thread's root event as thread id, so
each thread is its own session and its replies go back into it. The delivery id is the
event id (unique across Matrix), under the room.

Whether a message is for the bot (a DM, a free-response room, a mention in ``m.mentions`` or
the text, a reply to the bot, a control command, or ``require_mention`` off) is decided here:
one that is not is a ``Skipped``, never admitted nor recorded. Notices (``m.notice``, what
bots send) and the bot's own events are skipped too, so two bots never talk in a loop.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from chatgate.domain.commands import parse_command
from chatgate.domain.edits import EDIT_OF
from chatgate.domain.inbound import MAX_TEXT_CHARS, Attachment, Inbound
from chatgate.domain.source import ChatType, Source
from chatgate.platforms.kit.skipped import Skipped

PLATFORM = "matrix"
TRANSPORT = "matrix"
MEDIA = {"m.image": "image", "m.file": "document", "m.audio": "audio", "m.video": "video"}
TEXT_TYPES = frozenset({"m.text", "m.emote"})


class RoomInfo(msgspec.Struct, frozen=True):
    """What the adapter knows of a room (from /sync state, or read once from the homeserver)."""

    room_id: str
    members: int = 0
    name: str | None = None
    topic: str | None = None
    encrypted: bool = False
    direct: bool = False

    @property
    def is_dm(self) -> bool:
        return self.direct or 0 < self.members <= 2


class Addressing(msgspec.Struct, frozen=True):
    """Which messages are for the bot (``platforms.matrix``)."""

    bot_id: str
    bot_name: str | None = None
    require_mention: bool = True
    free_response_rooms: frozenset[str] = frozenset()


class Bad(msgspec.Struct, frozen=True):
    """An event we cannot use (malformed, too long): recorded with its reason."""

    reason: str
    delivery_id: str | None


def delivery_id(room_id: str, event_id: str) -> str:
    return f"{room_id}/{event_id}"


def relation(content: dict[str, Any]) -> dict[str, Any]:
    found = content.get("m.relates_to")
    return found if isinstance(found, dict) else {}


def thread_root(content: dict[str, Any]) -> str | None:
    rel = relation(content)
    root = rel.get("event_id")
    return root if rel.get("rel_type") == "m.thread" and isinstance(root, str) and root else None


def replied_to(content: dict[str, Any]) -> str | None:
    """The event a message replies to (``m.in_reply_to``); in a thread, a client's fallback
    (``is_falling_back``) is not a real reply."""
    rel = relation(content)
    if rel.get("rel_type") == "m.thread" and rel.get("is_falling_back") is True:
        return None
    quoted = rel.get("m.in_reply_to")
    event = quoted.get("event_id") if isinstance(quoted, dict) else None
    return event if isinstance(event, str) and event else None


def source_of(
    room: RoomInfo, sender: str, content: dict[str, Any], sender_name: str | None, thread: str | None = None
) -> Source:
    root = thread or thread_root(content)
    chat_type: ChatType = "thread" if root else "dm" if room.is_dm else "group"
    return Source(
        platform=PLATFORM,
        chat_id=room.room_id,
        chat_type=chat_type,
        user_id=sender,
        user_name=sender_name,
        thread_id=root,
        parent_chat_id=room.room_id if root else None,
        chat_name=None if room.is_dm else room.name,
        chat_topic=None if room.is_dm or root else room.topic,
    )


def strip_reply_fallback(body: str) -> str:
    """Drop the ``> <@who> quoted`` lines a client puts before a reply's own text."""
    if not body.startswith("> "):
        return body
    lines = body.split("\n")
    index = 0
    while index < len(lines) and lines[index].startswith(">"):
        index += 1
    return "\n".join(lines[index:]).lstrip("\n")


def mentions_bot(content: dict[str, Any], body: str, rules: Addressing) -> bool:
    mentions = content.get("m.mentions")
    users = mentions.get("user_ids") if isinstance(mentions, dict) else None
    if isinstance(users, list) and rules.bot_id in users:
        return True
    formatted = content.get("formatted_body")
    if isinstance(formatted, str) and (
        f"matrix.to/#/{rules.bot_id}" in formatted
        or "matrix.to/#/" + rules.bot_id.replace("@", "%40") in formatted
    ):
        return True
    return rules.bot_id in body or bool(rules.bot_name and body.startswith(f"{rules.bot_name}:"))


def strip_mention(body: str, rules: Addressing) -> str:
    """``BotName: hello`` / ``@bot:server hello`` -> ``hello``."""
    names = [rules.bot_id, *([rules.bot_name] if rules.bot_name else []), rules.bot_id.split(":")[0][1:]]
    for name in names:
        match = re.match(rf"\s*{re.escape(name)}\s*[:,]?\s*", body)
        if match and len(body) > match.end() and name:
            body = body[match.end() :]
            break
    return body.replace(rules.bot_id, "").strip()


def _addressed(room: RoomInfo, content: dict[str, Any], body: str, rules: Addressing, to_bot: bool) -> bool:
    if room.is_dm or not rules.require_mention or room.room_id in rules.free_response_rooms:
        return True
    if to_bot or mentions_bot(content, body, rules):
        return True
    return parse_command(strip_mention(body, rules)) is not None


def _attachments(content: dict[str, Any], msgtype: str) -> tuple[Attachment, ...]:
    url = content.get("url")
    if msgtype not in MEDIA or not isinstance(url, str):
        return ()
    found = content.get("info")
    info: dict[str, Any] = found if isinstance(found, dict) else {}
    mime = info.get("mimetype") if isinstance(info.get("mimetype"), str) else None
    size = info.get("size") if isinstance(info.get("size"), int) else None
    name = content.get("filename") or content.get("body")
    return (Attachment(MEDIA[msgtype], url, mime, name if isinstance(name, str) else None, size),)


def decode_message(
    event: dict[str, Any], room: RoomInfo, rules: Addressing, *,
    to_bot: bool = False, sender_name: str | None = None, received_at: float = 0.0,
    edited_thread: str | None = None,
) -> Inbound | Skipped | Bad:  # fmt: skip
    """An ``m.room.message``; never raises on input. ``to_bot``: it replies to the bot's event;
    ``edited_thread``: for an edit, the thread of the message it edits (an edit names none)."""
    event_id, sender, content = event.get("event_id"), event.get("sender"), event.get("content")
    if not isinstance(event_id, str) or not isinstance(sender, str) or not isinstance(content, dict):
        return Bad("event without an event_id, a sender or a content object", None)
    ident = delivery_id(room.room_id, event_id)
    if sender == rules.bot_id:
        return Skipped("the bot's own message")
    edit = relation(content).get("rel_type") == "m.replace"
    shown = content.get("m.new_content") if edit else content
    if not isinstance(shown, dict):
        return Bad("an edit without m.new_content", ident)
    msgtype, body = shown.get("msgtype"), shown.get("body")
    if msgtype == "m.notice":
        return Skipped("a notice (what bots send)")
    if not isinstance(msgtype, str) or not isinstance(body, str):
        return Bad("message without a msgtype or a text body", ident)
    if msgtype not in TEXT_TYPES and msgtype not in MEDIA:
        return Skipped(f"msgtype {msgtype[:40]} is not for the agent")
    reply = replied_to(content)
    text = strip_reply_fallback(body) if reply else body
    if not _addressed(room, content, text, rules, to_bot):
        return Skipped("not addressed to the bot")
    text = strip_mention(text, rules)
    if len(text) > MAX_TEXT_CHARS:
        return Bad(f"text is {len(text)} characters; the limit is {MAX_TEXT_CHARS}", ident)
    payload: dict[str, Any] = {}
    original = relation(content).get("event_id")
    if edit and isinstance(original, str):
        payload[EDIT_OF] = original
    return Inbound(
        transport=TRANSPORT,
        delivery_id=ident,
        source=source_of(room, sender, content, sender_name, edited_thread if edit else None),
        text=text,
        message_ref=original if edit and isinstance(original, str) else event_id,
        reply_to=reply,
        received_at=received_at,
        attachments=_attachments(shown, msgtype),
        payload=payload,
        observes_labels=True,
    )
