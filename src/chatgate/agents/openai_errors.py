"""What a failed model call means: a short reason for humans, and whether retrying can help.

Kept apart from the agent: the client's error types (``model_http.py``) are facts about HTTP,
not about the tool loop.
"""

from __future__ import annotations

from typing import NamedTuple

from chatgate.agents.base import FailureKind
from chatgate.agents.model_http import (
    ModelCallError,
    ModelStatusError,
    ModelStreamError,
    ModelTimeout,
    ModelUnreachable,
)

MAX_REASON_CHARS = 300


class Failure(NamedTuple):
    """A failed model call as the operator reads it (``reason``), and as a client acts on it."""

    reason: str
    retryable: bool
    """Whether sending the same turn again later may succeed."""
    kind: FailureKind


_TIMEOUT_STATUSES = frozenset({408, 504})
_UNAVAILABLE_STATUSES = frozenset({429, 502, 503})


def describe(exc: Exception, timeout_s: float) -> Failure:
    """A short reason for the operator, whether retrying may succeed, and the kind of failure."""
    if isinstance(exc, ModelTimeout):
        return Failure(f"model endpoint timed out (no data for {timeout_s:g}s)", True, "timeout")
    if isinstance(exc, ModelUnreachable):
        if exc.refused:
            return Failure(f"model endpoint refused the connection ({exc})", True, "unavailable")
        return Failure(f"could not reach model endpoint ({exc})", True, "unavailable")
    if isinstance(exc, ModelStatusError):
        status = exc.status
        reason = _body_message(exc.body) or exc.reason or "error"
        # 408 is a timeout reported by the server; same remedy as 429/5xx.
        retryable = status in (408, 429) or status >= 500
        kind: FailureKind = "failed"
        if status in _TIMEOUT_STATUSES:
            kind = "timeout"
        elif status in _UNAVAILABLE_STATUSES:
            kind = "unavailable"
        return Failure(f"HTTP {status} from model endpoint: {reason}", retryable, kind)
    if isinstance(exc, ModelStreamError):
        # An error event inside an otherwise successful stream; no status to judge by.
        return Failure(f"model endpoint reported an error mid-stream: {exc}", False, "failed")
    if isinstance(exc, ModelCallError):
        return Failure(f"model call failed ({exc})", False, "failed")
    return Failure(f"model call failed ({type(exc).__name__}: {exc})", False, "failed")


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
