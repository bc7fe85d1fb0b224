"""What a failed model call means: a short reason for humans, and whether retrying can help.

Kept apart from the agent because the SDK's exception types, and one quirk of its aiohttp
transport, are facts about the SDK, not about the tool loop.
"""

from __future__ import annotations

import aiohttp
import openai

MAX_REASON_CHARS = 300


def describe(exc: Exception, timeout_s: float) -> tuple[str, bool]:
    """A short reason for humans and whether retrying the same turn may succeed."""
    if isinstance(exc, openai.APITimeoutError) and not _refused(exc):
        return f"model endpoint timed out (no data for {timeout_s:g}s)", True
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
        return f"could not reach model endpoint ({detail})", True
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        reason = _body_message(exc.body) or exc.response.reason_phrase or "error"
        # 408 is a timeout reported by the server; same remedy as 429/5xx.
        retryable = status in (408, 429) or status >= 500
        return f"HTTP {status} from model endpoint: {reason}", retryable
    if isinstance(exc, openai.APIError):
        # An error event inside an otherwise successful stream; no status to judge by.
        return f"model endpoint reported an error mid-stream: {exc.message}", False
    return f"model call failed ({type(exc).__name__}: {exc})", False


def _refused(exc: BaseException) -> bool:
    """Whether the connection was refused or unreachable, which the aiohttp transport reports as a
    connect *timeout* (its exception map picks the first match, ``ClientConnectionError``)."""
    cause = exc.__cause__
    while cause is not None:
        timed_out = isinstance(cause, aiohttp.ServerTimeoutError)
        if isinstance(cause, aiohttp.ClientConnectorError) and not timed_out:
            return True
        cause = cause.__cause__
    return False


def _body_message(body: object) -> str | None:
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
        inner = body.get("error")
        if isinstance(inner, dict):
            return _body_message(inner)
        if isinstance(inner, str) and inner:
            return inner
    if isinstance(body, str) and body.strip():
        return body.strip()
    return None


def shorten(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= MAX_REASON_CHARS:
        return text
    return text[: MAX_REASON_CHARS - 1] + "…"
