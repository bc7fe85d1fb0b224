"""The parts of Telegram's update objects the adapter reads, as pydantic models.

Only what ``decode.py`` looks at is declared; every other field Telegram sends is
ignored, so a new Bot API field never breaks decoding. An update kind we do not
read (``edited_message``, ``business_message`` …) is kept in the update's extras,
only so the "unsupported update type" log can name it. ``date`` stays Telegram's
Unix time. A callback query's ``message`` may be an "inaccessible" message (only
chat, id and ``date: 0``): it validates as a ``Message`` with the rest unset.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class User(BaseModel):
    id: int
    is_bot: bool = False
    first_name: str = ""
    last_name: str | None = None
    username: str | None = None


class Chat(BaseModel):
    id: int
    type: str
    title: str | None = None
    username: str | None = None


class PhotoSize(BaseModel):
    file_id: str
    width: int
    height: int
    file_size: int | None = None


class File(BaseModel):
    """A document, voice note, audio, video, animation, video note or sticker: what we keep of it."""

    file_id: str
    file_size: int | None = None
    mime_type: str | None = None
    file_name: str | None = None
    emoji: str | None = None


class Message(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    message_id: int
    date: int
    chat: Chat
    from_user: User | None = Field(default=None, alias="from")
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


class CallbackQuery(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    id: str
    from_user: User = Field(alias="from")
    message: Message | None = None
    chat_instance: str | None = None
    data: str | None = None


class Update(BaseModel):
    model_config = ConfigDict(extra="allow")

    update_id: int
    message: Message | None = None
    callback_query: CallbackQuery | None = None

    def other_kinds(self) -> list[str]:
        """The update's other (unsupported) kinds, by name."""
        return sorted(k for k, v in (self.model_extra or {}).items() if v)
