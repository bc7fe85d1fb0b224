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


class ImageUrl(_Body):
    url: str = Field(min_length=1)
    detail: str | None = None


class ImagePart(_Body):
    """Chat Completions' image: a ``data:`` URL or an http(s) URL the gateway fetches."""

    type: Literal["image_url"]
    image_url: ImageUrl


class FileData(_Body):
    file_data: str | None = None
    """Base64 (or a ``data:`` URL of it)."""
    filename: str | None = Field(None, max_length=1000)
    file_id: str | None = None
    """OpenAI's Files API id: the gateway has no Files API, so it is refused by name."""


class FilePart(_Body):
    type: Literal["file"]
    file: FileData


class AudioData(_Body):
    data: str
    format: str = Field(min_length=1, max_length=20)


class AudioPart(_Body):
    type: Literal["input_audio"]
    input_audio: AudioData


class InputImagePart(_Body):
    """The Responses API's image: ``image_url`` as above (``file_id`` is refused)."""

    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: str | None = None


class InputFilePart(_Body):
    """The Responses API's file: base64 ``file_data`` with ``filename``, or a ``file_url``."""

    type: Literal["input_file"]
    file_data: str | None = None
    filename: str | None = Field(None, max_length=1000)
    file_url: str | None = None
    file_id: str | None = None


FilePartKind = ImagePart | FilePart | AudioPart | InputImagePart | InputFilePart
"""A content part that carries a file (``files.py`` takes each into the blob store)."""
ContentPart = Annotated[
    TextPart | ImagePart | FilePart | AudioPart | InputImagePart | InputFilePart, Field(discriminator="type")
]


def _joined(content: str | list[ContentPart] | None) -> str:
    if isinstance(content, list):
        return "".join(part.text for part in content if isinstance(part, TextPart))
    return content or ""


def _file_parts(content: str | list[ContentPart] | None) -> list[tuple[int, FilePartKind]]:
    if not isinstance(content, list):
        return []
    return [(i, part) for i, part in enumerate(content) if not isinstance(part, TextPart)]


class ChatMessage(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None

    def text(self) -> str:
        return _joined(self.content)

    def files(self) -> list[tuple[int, FilePartKind]]:
        """The parts that carry a file, with their index in ``content``."""
        return _file_parts(self.content)


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
    content: str | list[ContentPart]

    def text(self) -> str:
        return _joined(self.content)

    def files(self) -> list[tuple[int, FilePartKind]]:
        """The parts that carry a file, with their index in ``content``."""
        return _file_parts(self.content)


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


def _most_specific(errors: list[Any]) -> Any:
    """The error deepest in the body: a content part that is wrong is named by its index
    (``messages.0.content.1``), not by the string ``content`` could also have been."""
    return max(errors, key=lambda e: (sum(1 for p in e["loc"] if "[" not in str(p)), len(e["loc"])))


def _where(loc: tuple[Any, ...]) -> tuple[str | None, str]:
    """The parameter an error names, and the path within it. Union branch labels
    (``list[...]``) are left out; a content part's error names the part (``messages.0.content.1``)
    and says the field within it, without the part's type tag that pydantic puts in between."""
    for i, p in enumerate(loc[:-1]):
        if p == "content" and "[" in str(loc[i + 1]) and i + 2 < len(loc) and isinstance(loc[i + 2], int):
            param = ".".join(str(x) for x in loc[: i + 1] if "[" not in str(x)) + f".{loc[i + 2]}"
            return param, ".".join(str(x) for x in loc[i + 4 :])
    return ".".join(str(p) for p in loc if "[" not in str(p)) or None, ""


def parse(model: type[M], data: Any) -> M:
    """``data`` as ``model``; 400 naming the first offending field."""
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_request", "the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = _most_specific(exc.errors(include_url=False))
        where, inner = _where(tuple(first["loc"]))
        shown = f"{where or 'body'}: {inner}: " if inner else f"{where or 'body'}: "
        raise ApiError(400, "invalid_request", shown + first["msg"], param=where) from exc
    except RecursionError as exc:
        raise ApiError(400, "invalid_request", "the body is nested too deeply") from exc
