"""Telegram updates as ``Inbound`` events, with every identity in its own field.

Sources:

- a private chat is ``dm`` (chat id = the user's chat id);
- a group or supergroup is ``group``; per-user sessions come from the isolation
  policy (``sessions.group_sessions_per_user``), not from here;
- a message in a forum topic (``is_topic_message``) is ``thread``: ``chat_id`` is
  the forum's chat id, ``thread_id`` the topic id (``message_thread_id``),
  ``parent_chat_id`` is not set (the topic is not a chat of its own in Telegram).
  The General topic carries no topic id, so it is the ``group`` itself;
- the user name is the full name, else the username; ``chat_name`` is the chat
  title, observed from each update.

A text message keeps its text (or the media caption), ``message_ref`` is its
message id, ``reply_to`` the id of the message it quotes, and its photo
(largest size), document, voice, audio, video, animation, video note or sticker
become ``Attachment``s with the Telegram ``file_id`` as ``ref``. A button press
(``callback_query``) becomes a ``button`` event whose ``action_id`` is the
callback query id, ``message_ref`` the message the button is attached to, and
``text`` the callback data. Anything else is an ``UnsupportedUpdate`` with a reason.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from chatgate.domain.inbound import Attachment, Inbound
from chatgate.domain.prompts import parse_prompt_token
from chatgate.domain.source import ChatType, Source
from chatgate.platforms.telegram.models import CallbackQuery, Chat, Message, Update, User

PLATFORM = "telegram"
TRANSPORT = "telegram"
ALLOWED_UPDATES = ["message", "callback_query"]


class Decoded(msgspec.Struct, frozen=True):
    inbound: Inbound
    callback_id: str | None = None
    """Set for a button press: the query to answer once admission decided."""


class UnsupportedUpdate(msgspec.Struct, frozen=True):
    reason: str
    callback_id: str | None = None


def delivery_id(bot_id: int | str, update_id: int) -> str:
    return f"{bot_id}:{update_id}"


def user_name(user: User | None) -> str | None:
    if user is None:
        return None
    full = " ".join(p for p in (user.first_name, user.last_name) if p).strip()
    return full or user.username or None


def _chat_type(chat: Chat, topic_id: int | None) -> ChatType:
    if chat.type == "private":
        return "dm"
    if chat.type in ("group", "supergroup"):
        return "thread" if topic_id is not None else "group"
    return "channel"


def _source(chat: Chat, sender: User | None, topic_id: int | None, sender_chat: Chat | None) -> Source:
    chat_type = _chat_type(chat, topic_id)
    if sender is not None:
        uid: str | None = str(sender.id)
        name = user_name(sender)
    elif sender_chat is not None:  # posted on behalf of a chat (channel, anonymous admin)
        uid, name = str(sender_chat.id), sender_chat.title
    else:
        uid, name = None, None
    return Source(
        platform=PLATFORM,
        chat_id=str(chat.id),
        chat_type=chat_type,
        user_id=uid,
        user_name=name,
        thread_id=str(topic_id) if topic_id is not None else None,
        chat_name=chat.title if chat_type != "dm" else None,
    )


def _topic_id(message: Message) -> int | None:
    return message.message_thread_id if message.is_topic_message and message.message_thread_id else None


def attachments(message: Message) -> tuple[Attachment, ...]:
    found: list[Attachment] = []
    if message.photo:
        best = max(message.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
        found.append(Attachment("photo", best.file_id, "image/jpeg", None, best.file_size))
    if message.document is not None:
        d = message.document
        found.append(Attachment("document", d.file_id, d.mime_type, d.file_name, d.file_size))
    if message.voice is not None:
        v = message.voice
        found.append(Attachment("voice", v.file_id, v.mime_type, None, v.file_size))
    if message.audio is not None:
        a = message.audio
        found.append(Attachment("audio", a.file_id, a.mime_type, a.file_name, a.file_size))
    if message.video is not None:
        vd = message.video
        found.append(Attachment("video", vd.file_id, vd.mime_type, vd.file_name, vd.file_size))
    if message.animation is not None:
        an = message.animation
        found.append(Attachment("animation", an.file_id, an.mime_type, an.file_name, an.file_size))
    if message.video_note is not None:
        vn = message.video_note
        found.append(Attachment("video_note", vn.file_id, None, None, vn.file_size))
    if message.sticker is not None:
        st = message.sticker
        found.append(Attachment("sticker", st.file_id, None, st.emoji, st.file_size))
    return tuple(found)


def _reply_to(message: Message, topic_id: int | None) -> str | None:
    quoted = message.reply_to_message
    if quoted is None:
        return None
    if topic_id is not None and quoted.message_id == topic_id:
        return None  # in a topic, every message "replies" to the topic's creation; that is no quote
    return str(quoted.message_id)


def strip_mention(text: str, bot_username: str | None) -> str:
    """``/cmd@ThisBot args`` -> ``/cmd args``; a command for another bot is left as it is."""
    if not bot_username or not text.startswith("/"):
        return text
    head, sep, rest = text.partition(" ")
    name, at, mention = head.partition("@")
    if at and mention.lower() == bot_username.lower():
        return name + sep + rest
    return text


def decode_message(
    bot_id: int | str, update_id: int, message: Message, bot_username: str | None
) -> Decoded | UnsupportedUpdate:
    files = attachments(message)
    text = message.text if message.text is not None else (message.caption or "")
    if not text and not files:
        return UnsupportedUpdate("message without text, caption or supported media (a service message?)")
    topic = _topic_id(message)
    payload: dict[str, Any] = {"date": message.date}
    if message.media_group_id:
        payload["media_group_id"] = message.media_group_id
    stripped = strip_mention(text, bot_username)
    if stripped != text:
        payload["addressed_to"] = bot_username
    inbound = Inbound(
        transport=TRANSPORT,
        delivery_id=delivery_id(bot_id, update_id),
        source=_source(message.chat, message.from_user, topic, message.sender_chat),
        text=stripped,
        kind="text",
        message_ref=str(message.message_id),
        reply_to=_reply_to(message, topic),
        received_at=time.time(),
        attachments=files,
        payload=payload,
    )
    return Decoded(inbound)


def decode_callback(bot_id: int | str, update_id: int, query: CallbackQuery) -> Decoded | UnsupportedUpdate:
    if query.data is None:
        return UnsupportedUpdate("callback query without data (a game button?)", query.id)
    attached = query.message
    if attached is None:
        return UnsupportedUpdate("callback query from an inline message (no chat)", query.id)
    topic = _topic_id(attached)
    inbound = Inbound(
        transport=TRANSPORT,
        delivery_id=delivery_id(bot_id, update_id),
        source=_source(attached.chat, query.from_user, topic, None),
        text=query.data,
        kind="button",
        action_id=query.id,
        message_ref=str(attached.message_id),
        received_at=time.time(),
        payload=_button_payload(query.data, query.chat_instance),
    )
    return Decoded(inbound, callback_id=query.id)


def _button_payload(data: str, chat_instance: str | None) -> dict[str, Any]:
    """An approval prompt's button (``hp1:<prompt_id>:<option_id>``) also carries its answer."""
    payload: dict[str, Any] = {"data": data, "chat_instance": chat_instance}
    parsed = parse_prompt_token(data)
    if parsed is not None:
        payload["prompt_response"] = {"prompt_id": parsed[0], "option_id": parsed[1]}
    return payload


def decode_update(update: Update, bot_id: int | str, bot_username: str | None) -> Decoded | UnsupportedUpdate:
    if update.message is not None:
        return decode_message(bot_id, update.update_id, update.message, bot_username)
    if update.callback_query is not None:
        return decode_callback(bot_id, update.update_id, update.callback_query)
    kinds = update.other_kinds()
    return UnsupportedUpdate(f"unsupported update type {', '.join(kinds) or '(empty)'}")
