"""Frames the gateway sends to the connector: hello, outbound ops, acks, interrupts, going idle."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from chatgate.platforms.relay.frames.incoming import _Model

# -- gateway → connector ------------------------------------------------------------------------


class PromptOption(_Model):
    id: str
    label: str
    style: Literal["primary", "secondary", "success", "danger"] = "primary"


Metadata = dict[str, str]
"""The egress discriminators the connector routes by (``scope_id``, ``user_id``, ``thread_id``)."""


class SendAction(_Model):
    op: Literal["send"] = "send"
    chat_id: str
    content: str
    reply_to: str | None = None
    metadata: Metadata = Field(default_factory=dict)


class SendMediaAction(_Model):
    """A file (contract v1 ``send_media``), named by a URL the connector fetches: its own re-host
    (``POST /relay/media``, ``rehost.py``) or a public one."""

    op: Literal["send_media"] = "send_media"
    chat_id: str
    media_kind: Literal["image", "voice", "audio", "video", "document"]
    source_url: str
    caption: str = ""
    reply_to: str | None = None
    metadata: Metadata = Field(default_factory=dict)


class EditAction(_Model):
    op: Literal["edit"] = "edit"
    chat_id: str
    message_id: str
    content: str
    metadata: Metadata = Field(default_factory=dict)


class TypingAction(_Model):
    op: Literal["typing"] = "typing"
    chat_id: str
    metadata: Metadata = Field(default_factory=dict)


class DeleteAction(_Model):
    op: Literal["delete"] = "delete"
    chat_id: str
    message_id: str
    metadata: Metadata = Field(default_factory=dict)


class FollowUpAction(_Model):
    """A reply through an interaction's follow-up (the connector holds the interaction token)."""

    op: Literal["follow_up"] = "follow_up"
    session_key: str
    kind: str
    content: str
    metadata: Metadata = Field(default_factory=dict)


class PromptAction(_Model):
    """Native buttons: each option's callback token is ``hp1:<prompt_id>:<option id>``."""

    op: Literal["prompt"] = "prompt"
    chat_id: str
    prompt_kind: str
    prompt_id: str
    content: str
    options: tuple[PromptOption, ...]
    metadata: Metadata = Field(default_factory=dict)


class DraftAction(_Model):
    """A native stream frame (contract v1 ``draft``): cumulative ``content`` for one ``draft_id``;
    ``final`` seals the stream with the turn's final text."""

    op: Literal["draft"] = "draft"
    chat_id: str
    draft_id: int = Field(ge=0, lt=2**53)
    content: str
    final: bool = False
    metadata: Metadata = Field(default_factory=dict)


class TaskChunk(_Model):
    """One task of a card, in Slack's ``task_update`` chunk shape."""

    type: Literal["task_update"] = "task_update"
    id: str
    title: str
    status: Literal["in_progress", "complete", "error"]


class TaskCardAction(_Model):
    """A turn's tool calls as a live card (contract v1 ``task_card``): every task so far."""

    op: Literal["task_card"] = "task_card"
    chat_id: str
    card_id: str
    chunks: tuple[TaskChunk, ...]
    metadata: Metadata = Field(default_factory=dict)


class TaskCardStopAction(_Model):
    op: Literal["task_card_stop"] = "task_card_stop"
    chat_id: str
    card_id: str
    metadata: Metadata = Field(default_factory=dict)


Action = Annotated[
    SendAction
    | SendMediaAction
    | EditAction
    | TypingAction
    | DeleteAction
    | FollowUpAction
    | PromptAction
    | DraftAction
    | TaskCardAction
    | TaskCardStopAction,
    Field(discriminator="op"),
]


class HelloFrame(_Model):
    type: Literal["hello"] = "hello"
    platform: str
    botId: str
    command_manifest: tuple[dict[str, Any], ...] | None = None


class OutboundFrame(_Model):
    type: Literal["outbound"] = "outbound"
    requestId: str
    action: Action
    platform: str | None = None
    botId: str | None = None


class InboundAckFrame(_Model):
    type: Literal["inbound_ack"] = "inbound_ack"
    bufferId: str


class InterruptFrame(_Model):
    type: Literal["interrupt"] = "interrupt"
    session_key: str
    reason: str


class GoingIdleFrame(_Model):
    type: Literal["going_idle"] = "going_idle"


Outgoing = HelloFrame | OutboundFrame | InboundAckFrame | InterruptFrame | GoingIdleFrame
