"""One REST call to Discord, made exactly once, with an answer that says what happened.

The adapter's message operations do not go through discord.py's ``HTTPClient.request``:
that loop sleeps through 429s and repeats a request after a 500/502/504 (up to five
tries), so a message it re-posts after a 5xx that Discord had in fact accepted would be
shown twice without the outbox ever knowing. Here a call is made once; a 429 comes back
as ``RateLimited`` (with Discord's scope) for the rate budget to honour, a 5xx or a lost
answer as ``MaybeSent`` (the outbox marks a resent message as a possible duplicate), and
a connection that never opened as ``NotSent`` (``NotSent`` and ``MaybeSent`` are the
domain's, shared by every platform).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from chatgate.domain.errors import MaybeSent, NotSent, PlatformCallError
from chatgate.domain.media import FileBody, MediaRefused

if TYPE_CHECKING:
    import aiohttp

REQUEST_TIMEOUT = 15.0
CDN_HOSTS = frozenset({"cdn.discordapp.com", "media.discordapp.net"})


@dataclass(frozen=True)
class ApiRefused(PlatformCallError):
    """Discord answered with an error status (a 4xx other than 429)."""

    status: int
    code: int
    message: str

    def __str__(self) -> str:
        return f"Discord answered {self.status} (code {self.code}): {self.message}"


@dataclass(frozen=True)
class RateLimited(PlatformCallError):
    retry_after: float
    global_limit: bool
    scope: str

    def __str__(self) -> str:
        return f"Discord rate limit ({self.scope}): retry after {self.retry_after:g}s"


def _float(value: Any, default: float) -> float:
    try:
        found = float(value)
    except (TypeError, ValueError):
        return default
    return found if found >= 0 else default


def _json(text: str) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


class DiscordRest:
    """Bot-authenticated calls under ``api_base`` on one aiohttp session (created at ``open``)."""

    def __init__(self, token: str, api_base: str, user_agent: str) -> None:
        self._token = token
        self._base = api_base.rstrip("/")
        self._user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT))

    def may_download(self, url: str) -> bool:
        """Only Discord's own file hosts (and ``api_base``'s, for a test double) are fetched:
        an attachment's URL never sends the gateway anywhere else."""
        host = urlsplit(url).hostname or ""
        return urlsplit(url).scheme in ("https", "http") and (
            host in CDN_HOSTS or host == urlsplit(self._base).hostname
        )

    async def download(self, url: str) -> AsyncIterator[bytes]:
        """An attachment's bytes as they arrive; no bot token goes with them (the URL is signed).
        A failure is a ``MediaRefused`` with a reason a person reads."""
        import aiohttp

        if self._session is None:
            raise MediaRefused("the Discord adapter is not started")
        if not self.may_download(url):
            raise MediaRefused("the file is not on Discord's servers")
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=REQUEST_TIMEOUT, sock_read=60.0)
        try:
            async with self._session.get(
                url, timeout=timeout, headers={"User-Agent": self._user_agent}
            ) as response:
                if response.status != 200:
                    raise MediaRefused(
                        f"Discord refused the download (HTTP {response.status}; the link may have expired)"
                    )
                async for chunk in response.content.iter_chunked(64 * 1024):
                    yield chunk
        except (aiohttp.ClientError, TimeoutError, ConnectionError) as exc:
            raise MediaRefused(f"the download from Discord failed ({type(exc).__name__})") from None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def upload(self, path: str, payload: dict[str, Any], name: str, mime: str, body: FileBody) -> Any:
        """POST a message with one file (multipart: ``payload_json`` and ``files[0]``), as Discord
        takes attachments; its answers and failures mean what ``call``'s do."""
        import aiohttp

        from chatgate.platforms.kit.upload import FilePayload  # imports aiohttp: at the first upload

        form = aiohttp.FormData()
        form.add_field("payload_json", json.dumps(payload), content_type="application/json")
        form.add_field("files[0]", FilePayload(body, mime), filename=name)  # streamed from the store
        return await self.call("POST", path, form=form)

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, str] | None = None,
        form: Any = None,
    ) -> Any:
        """The answer's JSON (``None`` for 204), or a ``PlatformCallError`` saying what happened."""
        import aiohttp

        if self._session is None:
            raise NotSent(f"{method} {path}: the Discord adapter is not started")
        headers = {"Authorization": f"Bot {self._token}", "User-Agent": self._user_agent}
        sent: dict[str, Any] = {"data": form} if form is not None else {"json": body}
        try:
            async with self._session.request(
                method, self._base + path, params=query, headers=headers, **sent
            ) as response:
                text = await response.text()
                status, answer_headers = response.status, response.headers
        except aiohttp.ClientConnectorError as exc:
            raise NotSent(f"{method} {path}: cannot connect to Discord ({exc.os_error})") from None
        except (TimeoutError, aiohttp.ClientError, ConnectionError) as exc:
            raise MaybeSent(f"{method} {path}: no answer from Discord ({type(exc).__name__})") from None
        data = _json(text)
        if status < 300:
            return data
        found = data if isinstance(data, dict) else {}
        if status == 429:
            is_global = bool(found.get("global")) or answer_headers.get("X-RateLimit-Global") == "true"
            wait = _float(found.get("retry_after"), _float(answer_headers.get("Retry-After"), 1.0))
            raise RateLimited(
                wait, is_global, "global" if is_global else answer_headers.get("X-RateLimit-Scope", "user")
            )
        if status >= 500:
            raise MaybeSent(f"{method} {path}: Discord answered {status}")
        code = found.get("code")
        message = found.get("message")
        raise ApiRefused(
            status, code if isinstance(code, int) else 0, message if isinstance(message, str) else text[:200]
        )
