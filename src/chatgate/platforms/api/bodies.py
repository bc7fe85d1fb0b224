"""Request bodies: read within a byte bound, parsed as JSON, validated into typed models.

Everything a client may send is a pydantic model here, and the OpenAPI document takes
its request schemas from these models (``openapi.py``), so the two cannot drift apart.
Unknown fields are ignored (OpenAI clients send sampling options we do not use).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from starlette.requests import ClientDisconnect, Request

from chatgate.domain import bounded_json
from chatgate.domain.bounded_json import BadJson
from chatgate.domain.prompts import OPTION_IDS
from chatgate.platforms.api.errors import ApiError

M = TypeVar("M", bound=BaseModel)

Name = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")]
"""A conversation name (``user``, ``conversation``, the header): printable, at most 256 characters."""
MAX_MESSAGES = 1000
BODY_SECONDS = 30.0
"""A body must arrive within this long (the header deadline does not cover it): a client that
trickles its body cannot hold a connection for ever."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class TextPart(_Body):
    type: Literal["text", "input_text", "output_text"]
    text: str


class ChatMessage(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class StreamOptions(_Body):
    include_usage: bool = False
    """End the stream with a chunk carrying the request's ``usage`` (``choices`` empty)."""


class ChatCompletionRequest(_Body):
    model: str = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: Name | None = None


class InputMessage(_Body):
    type: Literal["message"] = "message"
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart]

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content


class ConversationRef(_Body):
    id: Name


class ResponseRequest(_Body):
    model: str = Field(min_length=1, max_length=200)
    input: str | list[InputMessage] = Field(min_length=1)
    stream: bool = False
    previous_response_id: str | None = Field(None, max_length=100)
    conversation: Name | ConversationRef | None = None
    user: Name | None = None
    instructions: str | None = None

    def conversation_name(self) -> str | None:
        if isinstance(self.conversation, ConversationRef):
            return self.conversation.id
        return self.conversation


class ApprovalAnswer(_Body):
    option: Literal[OPTION_IDS]  # type: ignore[valid-type]
    """``once``, ``session``, ``always`` or ``deny`` (only the tiers the prompt offers)."""


async def read_json(request: Request, max_bytes: int) -> Any:
    """The body as JSON; 400 past ``max_bytes`` (never reading further), 400 when it is not JSON."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise ApiError(400, "body_too_large", f"the body is {declared} bytes; the limit is {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(BODY_SECONDS):
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_bytes:
                    raise ApiError(400, "body_too_large", f"the body is over the limit of {max_bytes} bytes")
                chunks.append(chunk)
    except TimeoutError as exc:
        raise ApiError(400, "body_timeout", f"the body did not arrive within {BODY_SECONDS:g} s") from exc
    except ClientDisconnect as exc:
        raise ApiError(400, "incomplete_body", "the client went away before sending the whole body") from exc
    try:
        return bounded_json.parse(b"".join(chunks))
    except BadJson as exc:
        raise ApiError(400, "invalid_json", f"the body is not valid JSON: {exc.reason}") from None


def request_digest(data: Any) -> str:
    """What an ``Idempotency-Key`` is bound to of the body: all of it but ``stream``, which
    says how the answer is sent, not what is asked (a retry may stream what it first did not)."""
    fields = {k: v for k, v in data.items() if k != "stream"} if isinstance(data, dict) else data
    return bounded_json.digest(fields)


def parse(model: type[M], data: Any) -> M:
    """``data`` as ``model``; 400 naming the first offending field."""
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_request", "the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or None
        raise ApiError(400, "invalid_request", f"{where or 'body'}: {first['msg']}", param=where) from exc
    except RecursionError as exc:
        raise ApiError(400, "invalid_request", "the body is nested too deeply") from exc
