"""API keys and exchanges of the OpenAI-compatible API (``platforms.api``).

A key is ``cg-<key id>-<secret>``: the id is public (it names the key in
``chatgate api-key list`` and is the ``user_id`` of everything the key sends), the
secret is 32 random bytes. Only the SHA-256 of the whole token is stored: the token
has 256 bits of entropy, so a fast hash is as safe as a slow one and costs nothing
per request. The token is shown once, at ``create``.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import Literal

import msgspec

from chatgate.domain.outfiles import OutFile
from chatgate.domain.usage import Usage

KEY_PREFIX = "cg-"
KEY_ID_RE = re.compile(r"[0-9a-f]{12}")
_TOKEN_RE = re.compile(r"cg-([0-9a-f]{12})-[A-Za-z0-9_-]{43}")


class ApiKeyRecord(msgspec.Struct, frozen=True):
    key_id: str
    name: str
    created_at: float
    revoked_at: float | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def new_api_key() -> tuple[str, str]:
    """``(key id, token)``: a fresh key; the token is what the client sends as its bearer."""
    key_id = secrets.token_hex(6)
    return key_id, f"{KEY_PREFIX}{key_id}-{secrets.token_urlsafe(32)}"


def token_key_id(token: str) -> str | None:
    """The key id a well-formed token names (None for anything else, checked before any lookup)."""
    match = _TOKEN_RE.fullmatch(token)
    return match.group(1) if match else None


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


ExchangeStatus = Literal["in_progress", "completed", "failed", "cancelled"]

FAILED_OUTCOMES = frozenset({"agent_error", "model_unavailable", "model_timeout", "timeout", "given_up"})
"""Turns that ended without an answer; the API answers them 502, or 503/504 (``FAILURE_STATUS``)."""

FAILURE_STATUS = {"model_unavailable": 503, "model_timeout": 504, "timeout": 504, "given_up": 503}
"""The HTTP status of a failed exchange by its outcome; any other failure is 502."""


class ApiExchange(msgspec.Struct, frozen=True):
    """One admitted API request and, once its turn committed, its answer.

    Read from the inbox row of ``(transport, delivery_id)`` and the outbox rows in reply
    to it (``final:<seq>`` and its parts, or the reply of a control command).
    """

    seq: int
    session_key: str
    inbound_json: dict[str, object]
    status: str
    """The inbox status: ``queued`` (waiting or running), ``done`` or ``cancelled``."""
    outcome: str | None
    admitted_at: float
    answer: str | None
    """The final's text (parts joined), or None while there is none."""
    usage: Usage | None = None
    """The final's token usage as the turn recorded it (None: a command's reply, an older row)."""
    files: tuple[OutFile, ...] = ()
    """The files the turn attached (``file:<seq>:<n>`` rows), in order: the API serves each by a
    link only the request's key may fetch."""

    @property
    def state(self) -> ExchangeStatus:
        if self.status == "queued":
            return "in_progress"
        if self.status == "cancelled":
            return "cancelled"
        return "failed" if self.outcome in FAILED_OUTCOMES else "completed"
