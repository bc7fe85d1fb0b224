"""A thin client-server API client over aiohttp: one ``call`` and the homeserver's answers as
typed errors (``errors.py``).

Neither mautrix nor matrix-nio is used for these calls (docs/platforms/matrix.md, "Why no
client library"): mautrix's ``HTTPAPI`` drops ``retry_after_ms`` from ``M_LIMIT_EXCEEDED``
(its ``MLimitExceeded`` keeps the message only) and nio retries a 429 inside the call by
default, while the outbox must see the homeserver's delay and decide itself. The adapter
makes a dozen calls (sync, send, redact, typing, join, whoami, event, relations, messages,
members, state); each answer is read as plain JSON, bounded in size.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import aiohttp

from chatgate.domain.errors import MaybeSent, NotSent
from chatgate.domain.media import FileBody, MediaRefused
from chatgate.platforms.kit.upload import FilePayload
from chatgate.platforms.matrix.errors import ApiRefused, RateLimited

MAX_ANSWER_BYTES = 32 * 1024 * 1024
"""A sync answer is bounded by the filter's timeline limit; anything larger is not read."""
CLIENT = "/_matrix/client/v3"
MEDIA = "/_matrix/client/v1/media"
UPLOAD = "/_matrix/media/v3/upload"
"""Uploads stay on the media API (authenticated media moved downloads, not uploads)."""
MEDIA_CONFIG = (f"{MEDIA}/config", "/_matrix/media/v3/config")
"""Where the homeserver tells its upload limit: authenticated media first, then the old API."""
_MXC = re.compile(r"^mxc://([A-Za-z0-9.:\[\]-]{1,255})/([A-Za-z0-9_-]{1,255})$")


def parse_mxc(url: str) -> tuple[str, str]:
    """``mxc://server/media_id`` -> (server, media_id); ``MediaRefused`` for anything else."""
    found = _MXC.match(url)
    if found is None:
        raise MediaRefused("the file's address is not a Matrix content URI")
    return found.group(1), found.group(2)


def path(*parts: str) -> str:
    """``path("rooms", room_id, "send")`` with every part escaped (ids hold ``!``, ``:``, ``$``)."""
    return CLIENT + "".join("/" + quote(p, safe="") for p in parts)


def retry_after(body: Mapping[str, Any], header: str | None) -> float:
    """The delay a 429 asks for: ``retry_after_ms`` in the body, else the ``Retry-After`` header
    (seconds), else one second."""
    ms = body.get("retry_after_ms")
    if isinstance(ms, int | float) and not isinstance(ms, bool) and ms >= 0:
        return float(ms) / 1000.0
    if header is not None and header.strip().isdigit():
        return float(header.strip())
    return 1.0


def error_of(what: str, status: int, body: bytes, header: str | None) -> ApiRefused:
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    data: dict[str, Any] = answer if isinstance(answer, dict) else {}
    errcode = data.get("errcode") if isinstance(data.get("errcode"), str) else f"HTTP_{status}"
    message = data.get("error") if isinstance(data.get("error"), str) else "(no message)"
    if errcode == "M_LIMIT_EXCEEDED" or status == 429:
        return RateLimited(what, status, str(message)[:200], retry_after(data, header))
    return ApiRefused(what, status, str(errcode)[:60], str(message)[:200])


async def _bounded(stream: aiohttp.StreamReader) -> bytes:
    """The whole body, or its first ``MAX_ANSWER_BYTES + 1`` bytes when it is longer."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in stream.iter_chunked(1 << 16):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            break
    return b"".join(chunks)


class MatrixApi:
    """``call(method, path, ...)`` -> the JSON answer, or a ``PlatformCallError``.

    Create it on the event loop that uses it (the adapter does, in ``start``).
    """

    def __init__(self, homeserver: str, token: str = "", *, max_connections: int = 50) -> None:
        self.base = homeserver.rstrip("/")
        self.token = token
        self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=max_connections))

    async def call(
        self,
        method: str,
        where: str,
        body: Mapping[str, Any] | None = None,
        *,
        query: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        """One request; ``timeout`` bounds the whole call (a long poll's wait included)."""
        what = f"{method} {where.removeprefix(CLIENT)}"
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            async with self._http.request(
                method, self.base + where, json=body if method != "GET" else None, params=query,
                headers=headers, timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:  # fmt: skip
                status = response.status
                header = response.headers.get("Retry-After")
                data = await _bounded(response.content)
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            raise NotSent(f"{what}: could not connect: {type(exc).__name__}") from exc
        except TimeoutError as exc:
            raise MaybeSent(f"{what}: no answer within {timeout:.0f}s") from exc
        except aiohttp.ClientError as exc:
            raise MaybeSent(f"{what}: connection failed: {type(exc).__name__}: {exc}") from exc
        if len(data) > MAX_ANSWER_BYTES:
            raise MaybeSent(f"{what}: answer larger than {MAX_ANSWER_BYTES} bytes, not read")
        if status >= 300:
            raise error_of(what, status, data, header)
        try:
            answer = json.loads(data)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise MaybeSent(
                f"{what}: unreadable answer (HTTP {status}, {len(data)} bytes, not a JSON object)"
            )
        return answer

    async def download(self, mxc: str) -> AsyncIterator[bytes]:
        """A message's file (``mxc://server/id``) from the bot's own homeserver (authenticated
        media, which fetches other servers' files itself), as it arrives; ``MediaRefused``
        with a reason a person reads."""
        server, media_id = parse_mxc(mxc)
        where = f"{self.base}{MEDIA}/download/{quote(server, safe='')}/{quote(media_id, safe='')}"
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30.0, sock_read=60.0)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            async with self._http.get(where, headers=headers, timeout=timeout) as response:
                if response.status != 200:
                    raise MediaRefused(f"the homeserver refused the download (HTTP {response.status})")
                async for chunk in response.content.iter_chunked(1 << 16):
                    yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise MediaRefused(f"the download from the homeserver failed ({type(exc).__name__})") from None

    async def upload(self, name: str, mime: str, body: FileBody, timeout: float) -> str:
        """A file into the homeserver's media repository, streamed from the blob store; its
        ``mxc://`` URI, or a ``PlatformCallError`` (posting nothing in any room, so every
        failure is a plain retry or a refusal, never an unknown outcome)."""
        what = f"upload {name}"
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            async with self._http.post(
                f"{self.base}{UPLOAD}", data=FilePayload(body, mime), params={"filename": name},
                headers=headers, timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:  # fmt: skip
                status, header = response.status, response.headers.get("Retry-After")
                data = await _bounded(response.content)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise NotSent(f"{what}: {type(exc).__name__}") from exc  # nothing is in a room yet
        if status >= 300:
            raise error_of(what, status, data, header)
        try:
            uri = json.loads(data).get("content_uri")
        except (ValueError, AttributeError):
            uri = None
        if not isinstance(uri, str) or not uri.startswith("mxc://"):
            raise NotSent(f"{what}: the homeserver answered without a content_uri")
        return uri

    async def upload_limit(self) -> int | None:
        """The homeserver's largest upload (``m.upload.size``), or None when it does not say (an
        upload over it is refused with 413, or far over it, cut off mid-request)."""
        for where in MEDIA_CONFIG:
            try:
                size = (await self.call("GET", where, timeout=15.0)).get("m.upload.size")
            except (ApiRefused, MaybeSent, NotSent):
                continue
            if isinstance(size, int) and not isinstance(size, bool) and size > 0:
                return size
            return None
        return None

    async def aclose(self) -> None:
        await self._http.close()
