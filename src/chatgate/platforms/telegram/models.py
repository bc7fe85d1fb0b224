"""The parts of Telegram's update objects the adapter reads, as msgspec Structs.

Only what ``decode.py`` looks at is declared; every other field Telegram sends is
ignored, so a new Bot API field never breaks decoding. An update kind we do not
read (``edited_message``, ``business_message`` …) is named in the update's ``others``,
only so the "unsupported update type" log can name it. ``date`` stays Telegram's
Unix time. A callback query's ``message`` may be an "inaccessible" message (only
chat, id and ``date: 0``): it validates as a ``Message`` with the rest unset.
"""

from __future__ import annotations

from typing import Any

import msgspec


class User(msgspec.Struct, kw_only=True):
    id: int
    is_bot: bool = False
    first_name: str = ""
    last_name: str | None = None
    username: str | None = None


class Chat(msgspec.Struct, kw_only=True):
    id: int
    type: str
    title: str | None = None
    username: str | None = None


class PhotoSize(msgspec.Struct, kw_only=True):
    file_id: str
    width: int
    height: int
    file_size: int | None = None


class File(msgspec.Struct, kw_only=True):
    """A document, voice note, audio, video, animation, video note or sticker: what we keep of it."""

    file_id: str
    file_size: int | None = None
    mime_type: str | None = None
    file_name: str | None = None
    emoji: str | None = None


class Message(msgspec.Struct, kw_only=True):
    message_id: int
    date: int
    chat: Chat
    from_user: User | None = msgspec.field(default=None, name="from")
    sender_chat: Chat | None = None
    message_thread_id: int | None = None
    is_topic_message: bool | None = None
    reply_to_message: Message | None = None
    media_group_id: str | None = None
    text: str | None = None
    caption: str | None = None
    photo: list[PhotoSize] | None = None
    document: File | None = None
    voice: File | None = None
    audio: File | None = None
    video: File | None = None
    animation: File | None = None
    video_note: File | None = None
    sticker: File | None = None


class CallbackQuery(msgspec.Struct, kw_only=True):
    id: str
    from_user: User = msgspec.field(name="from")
    message: Message | None = None
    chat_instance: str | None = None
    data: str | None = None


class Update(msgspec.Struct, kw_only=True):
    update_id: int
    message: Message | None = None
    callback_query: CallbackQuery | None = None
    others: tuple[str, ...] = ()
    """The update's other (unsupported) kinds, by name: set by ``parse_update``."""

    def other_kinds(self) -> list[str]:
        """The update's other (unsupported) kinds, by name."""
        return list(self.others)


_READ = frozenset(f.encode_name for f in msgspec.structs.fields(Update)) - {"others"}


def parse_update(entry: dict[str, Any]) -> Update:
    """One update of a getUpdates result (``msgspec.ValidationError`` names the bad field)."""
    read = entry if "others" not in entry else {k: v for k, v in entry.items() if k != "others"}  # our slot
    update = msgspec.convert(read, Update, strict=False)
    others = tuple(sorted(k for k, v in entry.items() if v and k not in _READ))
    return msgspec.structs.replace(update, others=others) if others else update
