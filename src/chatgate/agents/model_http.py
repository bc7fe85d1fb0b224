"""The OpenAI-compatible agent's HTTP client: a streamed POST on aiohttp, with the SDK's retries.

Why not the official ``openai`` SDK, which this replaced: the agent uses two endpoints (chat
completions, streamed; audio transcriptions) and none of the SDK's types, yet importing the
SDK loads ``openai.types``, close to 900 modules of pydantic models: about 24 MB of a
gateway's resident memory, and a second of CPU in the thread that builds the agent while the
platforms connect. Its low-level ``post`` also cost 1.2-1.6 ms of CPU per streamed reply
where a plain aiohttp request costs 0.45-0.6 ms, and this client 0.54-0.63 ms
(``bench/openai_client.py``). What the SDK did for us
is kept, as its documented rules:

- Retries (``max_retries``, default 2) of a connection failure, a timeout, and the statuses
  408, 409, 429 and 5xx, unless the server says ``x-should-retry: false`` (``true`` retries
  any status). The wait is ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)
  when the server gives one of at most 120 s, else 0.5 s doubling to at most 8 s, less up to
  a quarter at random. A longer ``retry-after`` is not waited for: the error goes back; one
  that is not a finite number is ignored.
  Nothing is retried once the response's body has begun: a stream cut mid-reply fails the
  call, and the engine decides about the turn.
- ``timeout_s`` bounds getting a connection (a free one from the pool, the DNS lookup and
  the connect) and every read (a stalled stream fails, a slow one does not).
- ``OPENAI_ORG_ID`` and ``OPENAI_PROJECT_ID``, when set, are sent as the SDK sent them
  (``OpenAI-Organization``, ``OpenAI-Project``).
- Errors are typed (``ModelCallError`` and its subclasses below); ``openai_errors.py`` turns
  them into the reasons the operator reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import math
import os
import random
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

import aiohttp
import aiohttp.helpers
from yarl import URL

from chatgate.agents.sse import MAX_EVENT_BYTES, EventTooLarge, SseDecoder

INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
MAX_RETRY_AFTER = 120.0
MAX_CONNECTIONS = 1000
"""Connections to one endpoint at once, as the SDK's pool allowed; a turn beyond it waits for
one, within ``timeout_s``."""
MAX_ERROR_BODY = 64 * 1024
"""An error response's body is read up to this; the reason shown is a few hundred characters."""
MAX_ANSWER_BODY = 1024 * 1024
"""A whole (not streamed) answer, such as a transcription's text, is refused beyond this."""
DRAIN_SECONDS = 0.05
"""How long a finished answer's end may take to arrive before its connection is dropped instead."""
_RETRY_STATUSES = frozenset({408, 409, 429})
USER_AGENT = "chatgate (OpenAI-compatible agent; aiohttp)"


class ModelCallError(Exception):
    """A model call that failed; ``str()`` is a reason without secrets the server did not echo."""


class ModelTimeout(ModelCallError):
    """No connection or no data within ``timeout_s``."""


class ModelUnreachable(ModelCallError):
    def __init__(self, detail: str, *, refused: bool) -> None:
        super().__init__(detail)
        self.refused = refused
        """The host answered and refused (or no route): not a slow network."""


class ModelStatusError(ModelCallError):
    """The endpoint answered with an HTTP error status."""

    def __init__(self, status: int, reason: str, body: object) -> None:
        super().__init__(f"HTTP {status}: {reason}")
        self.status = status
        self.reason = reason
        """The HTTP reason phrase."""
        self.body = body
        """The error body: parsed JSON when it was JSON, else its text."""


class ModelStreamError(ModelCallError):
    """The stream itself said it failed (an error event or chunk), or could not be read."""

    def __init__(self, message: str, body: object = None) -> None:
        super().__init__(message)
        self.body = body


class ModelEndpoint:
    """One OpenAI-compatible base URL and key; a connection pool made on first use."""

    def __init__(self, base_url: str, api_key: str, *, timeout_s: float, max_retries: int) -> None:
        self._base = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}", "User-Agent": USER_AGENT, **_account_headers()}
        self._stream_headers = {
            **self._headers,
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
        }
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=timeout_s, sock_connect=timeout_s, sock_read=timeout_s
        )
        self._max_retries = max_retries
        self._proxy = _env_proxy(self._base)
        self._session: aiohttp.ClientSession | None = None

    async def stream(self, path: str, body: Mapping[str, Any]) -> ModelStream:
        """POST ``body`` as JSON and return its streamed chunks (close it when done)."""
        payload = json.dumps(body).encode()
        response = await self._send(path, lambda: payload, self._stream_headers)
        return ModelStream(response)

    async def post_form(self, path: str, form: Callable[[], aiohttp.FormData]) -> Any:
        """POST a multipart form (``form`` builds a fresh one per attempt) and return its JSON."""
        response = await self._send(path, form, self._headers)
        try:
            raw = await _read_at_most(response, MAX_ANSWER_BODY + 1)
        except (aiohttp.ClientError, TimeoutError) as exc:
            response.close()
            raise _transport_error(exc) from exc
        response.release()
        if len(raw) > MAX_ANSWER_BODY:
            raise ModelStreamError(f"the answer is larger than {MAX_ANSWER_BODY} bytes")
        try:
            return json.loads(raw)
        except ValueError:
            raise ModelStreamError(f"the answer is not JSON: {raw[:80]!r}") from None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _pool(self) -> aiohttp.ClientSession:
        if self._session is None:
            proxy, auth = self._proxy
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=MAX_CONNECTIONS),
                timeout=self._timeout,
                proxy=proxy,
                proxy_auth=auth,
            )
        return self._session

    async def _send(
        self, path: str, data: Callable[[], bytes | aiohttp.FormData], headers: Mapping[str, str]
    ) -> aiohttp.ClientResponse:
        url = self._base + path
        for attempt in range(self._max_retries + 1):
            last = attempt == self._max_retries
            try:
                response = await self._pool().post(url, data=data(), headers=headers)
            except (aiohttp.ClientError, TimeoutError) as exc:
                failure = _transport_error(exc)
                if last:
                    raise failure from exc
                await asyncio.sleep(_backoff(attempt))
                continue
            if response.status < 400:
                return response
            failure, wait = await _status_error(response)
            if last or wait is None:
                raise failure
            await asyncio.sleep(wait if wait > 0 else _backoff(attempt))
        raise AssertionError("unreachable: the last attempt raises")


class ModelStream:
    """The chunks of a streamed answer, as JSON values, until ``[DONE]`` or the end."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self._chunks = self._read()
        self._done = False

    def __aiter__(self) -> ModelStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await anext(self._chunks)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _transport_error(exc) from exc
        except EventTooLarge as exc:
            raise ModelStreamError(f"the stream sent {exc}") from None

    async def close(self) -> None:
        """End the answer; one not read to its end drops the connection, so the server stops.

        After ``[DONE]`` the body's last bytes (the chunked encoding's end) are read, briefly,
        so the connection goes back to the pool: a new connection per model call would cost
        a connect, and a resolver thread, every turn."""
        await self._chunks.aclose()
        reused = False
        try:
            reused = self._done and await _drained(self._response)
        finally:  # a cancel during the drain closes the connection too
            if reused:
                self._response.release()
            else:
                self._response.close()

    async def _read(self) -> AsyncGenerator[Any, None]:
        decoder: SseDecoder | None = None
        async for piece in self._response.content.iter_any():
            if decoder is None:
                if piece.lstrip()[:1] == b"{":
                    # A server that ignored ``stream`` (whatever its Content-Type says; an event
                    # stream never starts with a brace): the whole completion is one chunk.
                    yield await self._whole(piece)
                    self._done = True
                    return
                decoder = SseDecoder(MAX_EVENT_BYTES)
            for event in decoder.feed(piece):
                if event.data.startswith(b"[DONE]"):
                    self._done = True
                    return
                yield _chunk(event.name, event.data)
        self._done = True

    async def _whole(self, first: bytes) -> Any:
        """A whole completion, as the one chunk that streams the same (``message`` as ``delta``)."""
        raw = first + await _read_at_most(self._response, MAX_EVENT_BYTES + 1 - len(first))
        if len(raw) > MAX_EVENT_BYTES:
            raise ModelStreamError(f"the answer is larger than {MAX_EVENT_BYTES} bytes")
        value = _chunk(None, raw)
        choices = value.get("choices") if isinstance(value, dict) else None
        if isinstance(choices, list):
            value["choices"] = [
                {**c, "delta": c.get("message")} if isinstance(c, dict) and "message" in c else c
                for c in choices
            ]
        return value


async def _drained(response: aiohttp.ClientResponse) -> bool:
    """Whether the body ended within ``DRAIN_SECONDS`` and ``MAX_ERROR_BODY`` more bytes."""
    content, left = response.content, MAX_ERROR_BODY
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            while left > 0 and not content.at_eof():
                left -= len(await content.readany())
    except (TimeoutError, aiohttp.ClientError):
        return False
    return content.at_eof()


def _chunk(name: str | None, data: bytes) -> Any:
    try:
        value = json.loads(data)
    except ValueError:
        raise ModelStreamError(f"the stream sent an event that is not JSON: {data[:80]!r}") from None
    if isinstance(value, dict) and (name == "error" or value.get("error")):
        error = value.get("error", value)
        message = error.get("message") if isinstance(error, dict) else error
        raise ModelStreamError(str(message or "an error event with no message"), value)
    return value


def _transport_error(exc: BaseException) -> ModelCallError:
    if isinstance(exc, TimeoutError):  # aiohttp's ServerTimeoutError is one
        return ModelTimeout("no connection or no data in time")
    if isinstance(exc, aiohttp.ClientConnectorError) and not isinstance(exc, aiohttp.ClientConnectorDNSError):
        return ModelUnreachable(str(exc.os_error), refused=True)
    return ModelUnreachable(f"{type(exc).__name__}: {exc}", refused=False)


async def _status_error(response: aiohttp.ClientResponse) -> tuple[ModelStatusError, float | None]:
    """The error an HTTP error status means, and how long to wait before retrying (None: don't)."""
    try:
        raw = await _read_at_most(response, MAX_ERROR_BODY)
    except (aiohttp.ClientError, TimeoutError):
        raw = b""
    finally:
        response.release()
    text = raw.decode("utf-8", "replace")
    body: object = text
    with contextlib.suppress(ValueError):
        body = json.loads(text)
    error = ModelStatusError(response.status, response.reason or "", body)
    return error, _retry_wait(response.status, response.headers)


async def _read_at_most(response: aiohttp.ClientResponse, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while size < limit:
        part = await response.content.read(limit - size)
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts)


def _retry_wait(status: int, headers: Mapping[str, str]) -> float | None:
    """0 for "retry after the usual backoff", seconds the server asked for, or None: do not retry."""
    asked = _retry_after(headers)
    if asked is not None and asked > MAX_RETRY_AFTER:
        return None
    verdict = headers.get("x-should-retry")
    retry = verdict == "true" if verdict in ("true", "false") else status in _RETRY_STATUSES or status >= 500
    if not retry:
        return None
    return asked if asked is not None and asked > 0 else 0.0


def _retry_after(headers: Mapping[str, str]) -> float | None:
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue
        return seconds if math.isfinite(seconds) else None
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None


def _account_headers() -> dict[str, str]:
    names = (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project"))
    return {header: os.environ[env] for env, header in names if os.environ.get(env)}


def _env_proxy(base_url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The proxy ``HTTP(S)_PROXY``/``NO_PROXY`` (and ``.netrc``) name for the endpoint, if any.

    Found once, here (the agent is built off the event loop): aiohttp's ``trust_env`` looks
    again at every request, reading ``.netrc`` from disk, a fifth of a model call's CPU."""
    try:
        return aiohttp.helpers.get_env_proxy_for_url(URL(base_url))
    except LookupError:
        return None, None


def _backoff(attempt: int) -> float:
    return min(INITIAL_RETRY_DELAY * 2.0**attempt, MAX_RETRY_DELAY) * (1 - 0.25 * random.random())
