"""A thin Bot API client over httpx: one ``call`` and Telegram's answers as typed errors.

The adapter calls eight methods (getMe, setMyCommands, getUpdates, sendMessage,
editMessageText, deleteMessage, sendChatAction, answerCallbackQuery), so it needs
no client library's 400 pydantic models: this module posts form fields (non-scalar
values JSON-encoded, as Telegram accepts them) and returns the answer's ``result``
as plain JSON, which ``models.py`` reads where the adapter looks into it. httpx is
also what the OpenAI SDK uses, so the two share one HTTP stack. Every failure is
one of the ``errors.py`` classes (``ApiError``, ``NotSent``, ``MaybeSent``).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import httpx

from chatgate.platforms.telegram.errors import ApiError, MaybeSent, NotSent, bot_id_of

DEFAULT_BASE = "https://api.telegram.org"
_TOKEN_IN_URL = re.compile(r"/bot\d+:[^/\s]+/")


class _RedactTokens(logging.Filter):
    """httpx logs request URLs (at INFO, at DEBUG with ``log.level``), and ours hold the token."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if "/bot" in text:
            record.msg, record.args = _TOKEN_IN_URL.sub("/bot<token>/", text), None
        return True


_HTTPX_LOG = logging.getLogger("httpx")
if not any(isinstance(f, _RedactTokens) for f in _HTTPX_LOG.filters):
    _HTTPX_LOG.addFilter(_RedactTokens())


def _field(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def form(params: dict[str, Any]) -> dict[str, str]:
    """Bot API parameters as form fields: ``None`` left out, objects and lists as JSON."""
    return {k: _field(v) for k, v in params.items() if v is not None}


class BotApi:
    """``call(method, **params)`` -> the ``result`` of Telegram's answer, or a ``TelegramError``."""

    def __init__(self, token: str, base: str = DEFAULT_BASE, *, max_connections: int = 100) -> None:
        self.bot_id = bot_id_of(token)
        self._url = f"{base.rstrip('/')}/bot{token}/"
        # No proxy or certificate settings from the environment (``trust_env``): the same
        # behaviour as every release before this client; a long poll holds one connection.
        self._http = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=20),
            trust_env=False,
        )

    async def call(self, method: str, request_timeout: float, /, **params: Any) -> Any:
        """POST ``method``; ``request_timeout`` bounds each phase (connect, send, wait for the answer)."""
        try:
            response = await self._http.post(self._url + method, data=form(params), timeout=request_timeout)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise NotSent(f"{method}: could not connect: {type(exc).__name__}: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise MaybeSent(
                f"{method}: no answer within {request_timeout:.0f}s ({type(exc).__name__})"
            ) from exc
        except httpx.TransportError as exc:
            raise MaybeSent(f"{method}: connection failed: {type(exc).__name__}: {exc}") from exc
        return _result(method, response)

    async def aclose(self) -> None:
        await self._http.aclose()


def _result(method: str, response: httpx.Response) -> Any:
    try:
        answer = json.loads(response.content)
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool):
        # Never quote the body: a proxy's error page may be long, and it is not ours to log.
        raise MaybeSent(
            f"{method}: unreadable answer from Telegram (HTTP {response.status_code},"
            f" {len(response.content)} bytes, not the Bot API's JSON)"
        )
    if answer["ok"]:
        return answer.get("result")
    code = answer.get("error_code")
    description = answer.get("description")
    parameters = answer.get("parameters")
    raise ApiError(
        method,
        code if isinstance(code, int) else response.status_code,
        description if isinstance(description, str) else "(no description)",
        parameters if isinstance(parameters, dict) else {},
    )
