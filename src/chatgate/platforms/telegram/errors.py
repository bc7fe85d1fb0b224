"""What a Bot API call can fail with, and the call's shape, without importing the HTTP client.

The adapter, its poller and its outbound side see Telegram only through a ``Call``
(``botapi.BotApi.call``), so the HTTP client (aiohttp) is imported when the adapter
starts, after the gateway holds the bot token's credential lock: a second gateway
refused for that token never loads it. Every failure says whether the request may
have reached Telegram, because that decides what a failed send means:

- ``ApiRefused``: Telegram answered ``ok: false`` (its ``error_code``, ``description``
  and ``parameters``: ``retry_after`` for a 429, ``migrate_to_chat_id``);
- ``NotSent``: the request never left (connection refused, DNS, no free connection);
- ``MaybeSent``: it may have arrived (timeout, connection dropped mid-request, an
  answer that is not the Bot API's JSON).

``NotSent`` and ``MaybeSent`` are the domain's (``chatgate.domain.errors``), shared by every
platform; all three are ``PlatformCallError``s, and ``str()`` of each is safe to log (the
token is redacted by the caller).
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from chatgate.domain.errors import PlatformCallError
from chatgate.domain.media import FileBody


class Call(Protocol):
    """``call(method, request_timeout, **params)`` -> the ``result`` of Telegram's answer."""

    async def __call__(self, method: str, request_timeout: float, /, **params: Any) -> Any: ...


class FilePart(msgspec.Struct, frozen=True):
    """A file an upload carries: its name and type as Telegram is told them, and its stored body."""

    name: str
    mime: str
    body: FileBody


class Upload(Protocol):
    """``upload(method, request_timeout, field, file, **params)``: a multipart call (sendPhoto...)."""

    async def __call__(
        self, method: str, request_timeout: float, field: str, file: FilePart, /, **params: Any
    ) -> Any: ...


class ApiRefused(PlatformCallError):
    """Telegram answered the call with ``ok: false``."""

    def __init__(self, method: str, code: int, description: str, parameters: dict[str, Any]) -> None:
        super().__init__(f"{method}: Telegram error {code}: {description}")
        self.code = code
        self.description = description
        retry = parameters.get("retry_after")
        self.retry_after: float | None = float(retry) if isinstance(retry, int | float) else None
        migrate = parameters.get("migrate_to_chat_id")
        self.migrate_to: int | None = migrate if isinstance(migrate, int) else None

    def says(self, phrase: str) -> bool:
        return phrase in self.description.lower()


def bot_id_of(token: str) -> int:
    """The bot's id, the digits before the colon of its token; ``ValueError`` for a malformed token."""
    head, sep, secret = token.partition(":")
    if not sep or not head.isdigit() or not secret or any(c.isspace() for c in token):
        raise ValueError("the Telegram bot token is malformed (expected <digits>:<secret>)")
    return int(head)
