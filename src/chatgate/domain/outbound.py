"""What adapters declare about themselves and report back about a delivery."""

from __future__ import annotations

from typing import Literal

import msgspec

LengthUnit = Literal["chars", "utf16"]


class Capabilities(msgspec.Struct, frozen=True):
    edit: bool = False
    drafts: bool = False
    buttons: bool = False
    threads: bool = False
    max_length: int = 4096
    length_unit: LengthUnit = "chars"
    markdown: str = "plain"
    confirms_receipt: bool = False
    """The client confirms each final it displayed (so unconfirmed ones are re-sent)."""
    typing: bool = False
    edit_interval: float = 1.0
    """Seconds between two edits of a streaming preview."""
    draft_interval: float = 0.05
    """Seconds between two drafts of the reply so far, on a platform with ``drafts``."""
    chat_min_interval: float = 0.0
    """Seconds between two calls (send, edit, typing) to one chat."""
    platform_max_rate: float | None = None
    """Calls per second across all chats of this platform, if the platform limits it."""
    group_max_per_minute: int = 0
    """Messages per minute to one group chat (0: no such limit); needs ``GroupedChats``."""
    native_stream: bool = False
    """The platform streams a reply into one message itself ("the stream is the message": Slack's
    chat.startStream): previews are ``StreamingPlatform`` calls without a cursor, and the final's
    edit of that message seals it; needs ``StreamingPlatform``."""
    status_lines: bool = True
    """A running tool may show as a status line in the preview's text. False where the drafts
    are a text a client concatenates and compares with the final (the API): tool progress
    reaches it another way (approval events), never inside the reply's text."""
    max_upload_bytes: int = 0
    """The largest file the agent may send to this platform (``FilePlatform.send_file``), as the
    platform documents it; 0: the adapter uploads no files (the chat reads a line saying so)."""


class Delivered(msgspec.Struct, frozen=True):
    platform_message_id: str | None = None


class Deferred(msgspec.Struct, frozen=True):
    """No route to the chat right now (client offline); try again later."""

    reason: str
    retry_in: float = 60.0


RateScope = Literal["channel", "chat", "platform"]
"""Whose limit a 429 was: ``channel``, the platform said it is this chat's own (Discord's
non-global buckets, Slack's per-channel methods): only this chat waits, whatever else is
waiting; ``chat``, a chat was told to wait and the platform did not say why (Telegram, a
relay): this chat waits, and a second chat told to wait meanwhile means the bot's own limit;
``platform``: every chat of the platform waits."""


class RetryLater(msgspec.Struct, frozen=True):
    """The platform asked us to slow down (``scope`` set), or a transient error happened.

    A rate limit (``scope`` set, see ``RateScope``: what the platform said, or what its limit
    applies to) pauses that scope for ``retry_after`` seconds and never costs the
    row an attempt: waiting is not failing. A transient error (``scope`` None) is an attempt.
    """

    reason: str
    retry_after: float
    scope: RateScope | None = None


class Rejected(msgspec.Struct, frozen=True):
    """The platform refused this message for good."""

    reason: str


class Ambiguous(msgspec.Struct, frozen=True):
    """No answer: the platform may or may not have shown the message."""

    reason: str


DeliveryResult = Delivered | Deferred | RetryLater | Rejected | Ambiguous

PREVIEW_CURSOR = " ▍"

REPLY_VIA_KEY = "reply_via"
"""Outbox target key naming a reply route other than the chat (e.g. "interaction")."""

PREVIEW_KEY = "preview_message_id"
"""Outbox target key of a final's streamed preview message, which the final edits (``deliver_final``)."""

FAILURE_KEY = "failure"
"""Outbox target key set on a final that is the gateway's apology for a failed turn (the
turn's outcome, ``agent_error`` or ``timeout``), so a platform that can style it as an error does."""

TaskState = Literal["in_progress", "complete", "error"]


class TaskProgress(msgspec.Struct, frozen=True):
    """One tool call of a turn as a task card shows it (``TaskCardPlatform``)."""

    id: str
    title: str
    status: TaskState
