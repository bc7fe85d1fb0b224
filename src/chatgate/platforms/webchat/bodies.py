"""Request bodies of the web chat's account and history routes: small JSON, typed at the edge."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError
from starlette.requests import ClientDisconnect, Request

from chatgate.domain.accounts import MAX_PASSWORD_CHARS
from chatgate.domain.errors import ChatgateError
from chatgate.domain.web_chats import TITLE_CHARS

MAX_BODY_BYTES = 8 * 1024
BODY_SECONDS = 10.0
M = TypeVar("M", bound=BaseModel)


class BodyError(ChatgateError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SignIn(_Body):
    """A sign-in token alone, or a user name with a password."""

    token: Annotated[str, StringConstraints(max_length=200, strip_whitespace=True)] | None = None
    name: Annotated[str, StringConstraints(max_length=64, strip_whitespace=True, to_lower=True)] | None = None
    password: Annotated[str, StringConstraints(max_length=MAX_PASSWORD_CHARS)] | None = None


class Rename(_Body):
    title: Annotated[str, StringConstraints(min_length=1, max_length=TITLE_CHARS, strip_whitespace=True)]


class AddUser(_Body):
    """A new user's name (checked as ``chatgate user add`` checks it) and role."""

    name: Annotated[str, StringConstraints(max_length=64, strip_whitespace=True, to_lower=True)]
    admin: bool = False


class Revoke(_Body):
    """One of: a user name (the user, every token and session) or a sign-in token id."""

    user: Annotated[str, StringConstraints(max_length=64)] | None = None
    token_id: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{12}$")] | None = None


async def read_body(request: Request, model: type[M]) -> M:
    """The JSON body as ``model``; ``BodyError`` for anything else (never reading past the bound)."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise BodyError("invalid_request", "send the body as application/json")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(BODY_SECONDS):
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise BodyError("too_large", f"the body is over {MAX_BODY_BYTES} bytes")
                chunks.append(chunk)
    except TimeoutError as exc:
        raise BodyError("body_timeout", f"the body did not arrive within {BODY_SECONDS:g} s") from exc
    except ClientDisconnect as exc:
        raise BodyError("incomplete_body", "the client went away before sending the whole body") from exc
    try:
        data: Any = json.loads(b"".join(chunks).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BodyError("invalid_json", f"the body is not valid JSON: {str(exc)[:200]}") from exc
    if not isinstance(data, dict):
        raise BodyError("invalid_request", "the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise BodyError("invalid_request", f"{where}: {first['msg']}") from exc
