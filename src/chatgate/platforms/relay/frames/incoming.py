"""Frames the connector sends the gateway, and the reasons a frame is refused (see the package docstring)."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError, field_validator
from pydantic_core import ErrorDetails

from chatgate.domain.inbound import MAX_TEXT_CHARS
from chatgate.domain.outbound import Capabilities

REHOST_MAX_BYTES = 25 * 1024 * 1024
"""The contract's cap on a connector re-host (``POST /relay/media``): the largest file ``send_media``
carries."""

CONTRACT_VERSION = 1
LEGACY_OPS = frozenset({"send", "edit", "typing", "follow_up"})
MAX_BODY_B64 = 512 * 1024
INTAKE_TYPES = frozenset({"inbound", "passthrough_forward"})
"""Frames that carry a delivery: refused ones are recorded and acknowledged, never just dropped."""
_OBJECT_FIELDS = frozenset({"event", "source", "forward", "result", "descriptor"})


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


# -- lenient scalar reads -----------------------------------------------------------------------


def read_buffer_id(value: object) -> str | None:
    """A non-empty string or integer (as text), else no buffer id: the frame is still decoded."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _label(value: object) -> str | None:
    """An id or a name: a string or an integer (ids are numbers on some platforms), trimmed."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"must be a string, not {type(value).__name__}")
    return str(value).strip() or None


def _loose_label(value: object) -> str | None:
    """A label read only to be logged: anything that is not one is no label."""
    try:
        return _label(value)
    except ValueError:
        return None


def _required_label(value: object) -> str:
    label = _label(value)
    if label is None:
        raise ValueError("is missing")
    return label


def _non_empty_str(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty string")
    return value


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dict_or_none(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


BufferId = Annotated[str | None, PlainValidator(read_buffer_id)]
Label = Annotated[str | None, PlainValidator(_label)]
LooseLabel = Annotated[str | None, PlainValidator(_loose_label)]
RequiredLabel = Annotated[str, PlainValidator(_required_label)]
NonEmptyStr = Annotated[str, PlainValidator(_non_empty_str)]
LooseStr = Annotated[str | None, PlainValidator(_str_or_none)]
LooseInt = Annotated[int | None, PlainValidator(_int_or_none)]
LooseObject = Annotated[dict[str, Any] | None, PlainValidator(_dict_or_none)]


# -- the text lane's event (``inbound.event``) --------------------------------------------------


def _chat_type(value: object) -> str:
    if not value:
        return "dm"
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value.strip().lower()


def _text(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError("must be a string")
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(f"is {len(value)} characters; the limit is {MAX_TEXT_CHARS}")
    return value


def _media_urls(value: object) -> tuple[str, ...]:
    if not value:
        return ()
    if not isinstance(value, list):
        raise ValueError("must be a list")
    if not all(isinstance(url, str) and url for url in value):
        raise ValueError("must hold non-empty strings")
    return tuple(value)


def _media_kind(value: object) -> str:
    return str(value or "document")


def _media(value: object) -> tuple[Media, ...]:
    """Metadata for ``media_urls``: entries that are not an object with a string url are ignored."""
    if not isinstance(value, list):
        return ()
    return tuple(
        Media.model_validate(m) for m in value if isinstance(m, dict) and isinstance(m.get("url"), str)
    )


class SessionSource(_Model):
    """The contract's SessionSource, as the connector resolved it."""

    platform: RequiredLabel
    chat_id: RequiredLabel
    chat_type: Annotated[str, PlainValidator(_chat_type)] = "dm"
    user_id: Label = None
    thread_id: Label = None
    parent_chat_id: Label = None
    scope_id: Label = None
    user_id_alt: Label = None
    chat_name: Label = None
    chat_topic: Label = None
    user_display_name: Label = None
    user_name: Label = None
    user_handle: Label = None
    message_id: Label = None


class Media(_Model):
    url: str
    kind: Annotated[str, PlainValidator(_media_kind)] = "document"
    mime: LooseStr = None
    filename: LooseStr = None
    size: LooseInt = None


class InboundEvent(_Model):
    source: SessionSource
    text: Annotated[str, PlainValidator(_text)] = ""
    message_id: Label = None
    reply_to_message_id: Label = None
    message_type: LooseStr = None
    media_urls: Annotated[tuple[str, ...], PlainValidator(_media_urls)] = ()
    media: Annotated[tuple[Media, ...], PlainValidator(_media)] = ()
    reply_to: LooseObject = None
    prompt_response: LooseObject = None


# -- the descriptor -----------------------------------------------------------------------------


class Descriptor(_Model):
    """A fronted platform's capabilities."""

    contract_version: int = CONTRACT_VERSION
    platform: str
    label: str = ""
    max_message_length: int = Field(0, ge=0)
    supports_draft_streaming: bool = False
    supports_edit: bool = False
    supports_threads: bool = False
    markdown_dialect: str = "plain"
    len_unit: Literal["chars", "utf16"] = "chars"
    supported_ops: list[str] | None = None

    @field_validator("platform")
    @classmethod
    def _platform_name(cls, value: str) -> str:
        name = value.strip().lower()
        if not name:
            raise ValueError("must not be empty")
        return name

    def supports(self, op: str) -> bool:
        """An op beyond the legacy set is used only when advertised."""
        if self.supported_ops:
            return op in self.supported_ops
        return op in LEGACY_OPS

    def capabilities(self) -> Capabilities:
        return Capabilities(
            edit=self.supports_edit and self.supports("edit"),
            drafts=False,
            buttons=self.supports("prompt"),
            threads=self.supports_threads,
            max_length=self.max_message_length or 4096,
            length_unit=self.len_unit,
            markdown=self.markdown_dialect,
            typing=self.supports("typing"),
            edit_interval=1.0,
            # The stream is the message only where the descriptor says so AND advertises the op
            # (the flag alone is not enough; ``draft`` never fails open).
            native_stream=self.supports_draft_streaming
            and bool(self.supported_ops)
            and self.supports("draft"),
            # files through the connector's re-host (``rehost.py``), only where it lists the op
            max_upload_bytes=REHOST_MAX_BYTES if self.supports("send_media") else 0,
        )


# -- connector → gateway ------------------------------------------------------------------------


def _body(value: object) -> bytes:
    """``forward.bodyB64`` decoded: the interaction body exactly as Discord POSTed it."""
    if not isinstance(value, str):
        raise ValueError("must be a base64 string")
    if len(value) > MAX_BODY_B64:
        raise ValueError(f"is {len(value)} characters; the limit is {MAX_BODY_B64}")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"is not base64: {exc}") from None


class Forward(_Model):
    platform: str
    body: Annotated[bytes, PlainValidator(_body)] = Field(alias="bodyB64")


def _seconds(value: object) -> float | None:
    """A sane ``retry_after`` (0 to one hour), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if 0 <= seconds <= 3600 else None


def _message_id(value: object) -> str | None:
    return None if value is None or value == "" else str(value)


def _error(value: object) -> str | None:
    return None if value is None else str(value)


def _success(value: object) -> bool:
    return value is True


class Result(_Model):
    """What the connector did with one request; never refused (a bad hint is no hint)."""

    success: Annotated[bool, PlainValidator(_success)] = False
    message_id: Annotated[str | None, PlainValidator(_message_id)] = None
    error: Annotated[str | None, PlainValidator(_error)] = None
    retry_after: Annotated[float | None, PlainValidator(_seconds)] = None


class DescriptorFrame(_Model):
    type: Literal["descriptor"]
    descriptor: Descriptor


class InboundFrame(_Model):
    type: Literal["inbound"]
    event: InboundEvent
    bufferId: BufferId = None


class PassthroughFrame(_Model):
    type: Literal["passthrough_forward"]
    forward: Forward
    bufferId: BufferId = None


class OutboundResultFrame(_Model):
    type: Literal["outbound_result"]
    requestId: LooseStr = None
    result: Result


class InterruptInboundFrame(_Model):
    type: Literal["interrupt_inbound"]
    session_key: NonEmptyStr
    chat_id: LooseLabel = None


class GoingIdleAckFrame(_Model):
    type: Literal["going_idle_ack"]


Incoming = Annotated[
    DescriptorFrame
    | InboundFrame
    | PassthroughFrame
    | OutboundResultFrame
    | InterruptInboundFrame
    | GoingIdleAckFrame,
    Field(discriminator="type"),
]
IntakeFrame = InboundFrame | PassthroughFrame
HubFrame = InboundFrame | PassthroughFrame | InterruptInboundFrame
"""What the connection hands up to the hub (descriptors, results and idle acks it handles itself)."""


# -- why a frame was refused --------------------------------------------------------------------


def describe(exc: ValidationError, frame_type: str) -> str:
    """The first error of a frame's validation, as a reason naming the field as the wire does."""
    error = exc.errors(include_url=False, include_input=False)[0]
    # The union puts the tag first: ('inbound', 'event', 'source') is the frame's event.source.
    return f"{frame_type} frame: {_detail(error, error['loc'][1:])}"


def _detail(error: ErrorDetails, loc: tuple[int | str, ...]) -> str:
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
    name = loc[-1] if loc else ""
    kind = error["type"]
    if name in _OBJECT_FIELDS and kind in ("missing", "model_type", "model_attributes_type", "dict_type"):
        parent = "".join(f".{p}" for p in loc[:-1]).lstrip(".")
        return f"{parent} has no {name!r} object" if parent else f"no {name!r} object"
    if kind == "missing":
        return f"{path} is missing"
    if kind == "value_error":
        return f"{path} {error.get('ctx', {}).get('error', error['msg'])}"
    return f"{path}: {error['msg']}" if path else error["msg"]
