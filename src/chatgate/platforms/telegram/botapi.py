"""A thin Bot API client over aiohttp: one ``call`` and Telegram's answers as typed errors.

The adapter calls eight methods (getMe, setMyCommands, getUpdates, sendMessage,
editMessageText, deleteMessage, sendChatAction, answerCallbackQuery), so it needs
no client library's 400 pydantic models: this module posts form fields (non-scalar
values JSON-encoded, as Telegram accepts them) and returns the answer's ``result``
as plain JSON, which ``models.py`` reads where the adapter looks into it. Every
failure is one of the ``errors.py`` classes (``ApiRefused``, ``NotSent``, ``MaybeSent``).

aiohttp, not httpx, by measurement: against the Bot API double one sendMessage cost
0.21 ms of CPU with aiohttp's client and 1.8-2.7 ms with httpx's (h11 parses in pure
Python), and the gateway makes two or three such calls per message. The OpenAI-compatible
agent's client is on aiohttp too, so with that agent it costs nothing extra.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import aiohttp

from chatgate.domain.errors import MaybeSent, NotSent
from chatgate.domain.media import MediaRefused
from chatgate.platforms.kit.upload import FilePayload
from chatgate.platforms.telegram.errors import ApiRefused, FilePart, bot_id_of

DEFAULT_BASE = "https://api.telegram.org"
DOWNLOAD_READ_TIMEOUT = 60.0


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
    """``call(method, timeout, **params)`` -> the ``result`` of Telegram's answer, or a ``PlatformCallError``.

    Create it on the event loop that will use it (the adapter does, in ``start``).
    """

    def __init__(self, token: str, base: str = DEFAULT_BASE, *, max_connections: int = 100) -> None:
        self.bot_id = bot_id_of(token)
        self._url = f"{base.rstrip('/')}/bot{token}/"
        self._files = f"{base.rstrip('/')}/file/bot{token}/"
        # aiohttp reads no proxy settings from the environment (trust_env is off), like every
        # release before this client; a long poll holds one of the connections.
        self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=max_connections))

    async def call(self, method: str, request_timeout: float, /, **params: Any) -> Any:
        """POST ``method``; ``request_timeout`` bounds the whole call, a long poll's wait included."""
        status, body = await self._post(method, request_timeout, form(params))
        return _result(method, status, body)

    async def _post(self, method: str, request_timeout: float, data: Any) -> tuple[int, bytes]:
        """The status and body of one POST; a failure says whether Telegram may have it
        (``MaybeSent``) or surely has not (``NotSent``)."""
        timeout = aiohttp.ClientTimeout(total=request_timeout)
        try:
            async with self._http.post(self._url + method, data=data, timeout=timeout) as response:
                return response.status, await response.read()
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            raise NotSent(f"{method}: could not connect: {type(exc).__name__}: {exc}") from exc
        except TimeoutError as exc:
            raise MaybeSent(f"{method}: no answer within {request_timeout:.0f}s") from exc
        except aiohttp.ClientError as exc:
            raise MaybeSent(f"{method}: connection failed: {type(exc).__name__}: {exc}") from exc

    async def upload(
        self, method: str, request_timeout: float, field: str, file: FilePart, /, **params: Any
    ) -> Any:
        """POST ``method`` as multipart/form-data with ``file`` in ``field`` (sendPhoto, sendDocument).
        Its failures mean what ``call``'s do: a dropped upload may have reached Telegram."""
        body = aiohttp.FormData()
        for key, value in form(params).items():
            body.add_field(key, value)
        body.add_field(field, FilePayload(file.body, file.mime), filename=file.name)  # streamed
        status, answer = await self._post(method, request_timeout, body)
        if status == 413:  # the server took none of it: refused for good, not an unknown outcome
            raise ApiRefused(method, 413, "Request Entity Too Large", {})
        return _result(method, status, answer)

    async def download(self, file_path: str) -> AsyncIterator[bytes]:
        """A file's bytes (``getFile``'s ``file_path``), streamed as they arrive. A failure is a
        ``MediaRefused`` naming its kind only: the URL holds the token. The fetch step bounds
        the time; each read is bounded here too (``DOWNLOAD_READ_TIMEOUT``)."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=DOWNLOAD_READ_TIMEOUT)
        try:
            async with self._http.get(self._files + quote(file_path), timeout=timeout) as response:
                if response.status != 200:
                    raise MediaRefused(f"Telegram refused the download (HTTP {response.status})")
                async for chunk in response.content.iter_chunked(64 * 1024):
                    yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise MediaRefused(f"the download from Telegram failed ({type(exc).__name__})") from None

    async def aclose(self) -> None:
        await self._http.close()


def _result(method: str, status: int, body: bytes) -> Any:
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool):
        # Never quote the body: a proxy's error page may be long, and it is not ours to log.
        raise MaybeSent(
            f"{method}: unreadable answer from Telegram (HTTP {status},"
            f" {len(body)} bytes, not the Bot API's JSON)"
        )
    if answer["ok"]:
        return answer.get("result")
    code = answer.get("error_code")
    description = answer.get("description")
    parameters = answer.get("parameters")
    raise ApiRefused(
        method,
        code if isinstance(code, int) else status,
        description if isinstance(description, str) else "(no description)",
        parameters if isinstance(parameters, dict) else {},
    )
