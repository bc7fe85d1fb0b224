"""The web chat wire format: typed frames validated at the edge.

The inside of the gateway never sees a malformed dict: a frame either decodes
into one of these models or into a ``FrameError`` with a code the client can show.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from chatgate.domain.errors import ChatgateError
from chatgate.domain.web_chats import REGENERATES_KEY

Id = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]


_MAX_DIGITS = sys.get_int_max_str_digits()


class _Frame(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Hello(_Frame):
    type: Literal["hello"]
    chat_id: Id
    user_id: Id
    user_name: Annotated[str, StringConstraints(max_length=200)] | None = None
    token: str | None = None


class Upload(_Frame):
    """A file the page uploaded (``POST .../uploads``): the signed ``ref`` it was given."""

    ref: Annotated[str, StringConstraints(min_length=1, max_length=400)]
    name: Annotated[str, StringConstraints(max_length=300)] = ""


class Message(_Frame):
    type: Literal["message"]
    id: Id
    text: str
    attachments: Annotated[tuple[Upload, ...], Field(max_length=10)] = ()
    regenerates: Id | None = None
    """Sent by Regenerate: the id of the message whose answer this asks again (recorded, so the
    history folds the new answer into the old one's versions by fact, not by guess)."""

    def payload(self) -> dict[str, Any]:
        """What the inbox records with the message beyond its text (``domain/web_chats.py``)."""
        return {REGENERATES_KEY: self.regenerates} if self.regenerates else {}


class Received(_Frame):
    type: Literal["received"]
    message_id: Id


class Button(_Frame):
    """A tap on a prompt's option. ``id`` (optional) dedupes a resend, like a message's."""

    type: Literal["button"]
    prompt_id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,48}$")]
    option_id: Literal["once", "session", "always", "deny"]
    id: Id | None = None


AnyClientFrame = Hello | Message | Received | Button
ClientFrame = Annotated[AnyClientFrame, Field(discriminator="type")]
_CLIENT: TypeAdapter[AnyClientFrame] = TypeAdapter(ClientFrame)
KNOWN_TYPES = ("hello", "message", "received", "button")


class FrameError(ChatgateError):
    def __init__(self, code: str, message: str, frame_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.frame_id = frame_id


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"][1:] or err["loc"])
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def decode(raw: str | bytes) -> AnyClientFrame:
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FrameError("invalid_utf8", f"frame is not valid UTF-8 (byte {exc.start})") from exc
    try:
        data: Any = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise FrameError("invalid_json", f"frame is not JSON: {exc.msg} at {exc.pos}") from exc
    except RecursionError as exc:
        raise FrameError("invalid_json", "frame is nested too deeply") from exc
    except ValueError as exc:  # Python's guard on int("9" * 5000): a number too long to convert
        raise FrameError(
            "invalid_json", f"frame is not usable JSON: a number has more than {_MAX_DIGITS} digits"
        ) from exc
    if not isinstance(data, dict):
        raise FrameError("invalid_frame", "frame must be a JSON object")
    frame_id = data.get("id") if isinstance(data.get("id"), str) else None
    kind = data.get("type")
    if kind not in KNOWN_TYPES:
        raise FrameError(
            "unknown_type", f"unknown frame type {kind!r}; expected one of {list(KNOWN_TYPES)}", frame_id
        )
    try:
        return _CLIENT.validate_python(data)
    except ValidationError as exc:
        raise FrameError("invalid_frame", _describe(exc), frame_id) from exc


def encode(frame: dict[str, Any]) -> str:
    return json.dumps(frame, ensure_ascii=False, separators=(",", ":"))
