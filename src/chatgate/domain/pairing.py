"""DM pairing: a stranger in a direct message gets a one-time code; the operator approves it.

Codes are 8 characters from an alphabet without look-alikes (no 0/O, 1/I/L), so a code
read off a phone screen and typed into a terminal is typed right. A code lives for a
bounded time; every code ever issued and every failed approval is durable (the store's
``Pairing`` role), so neither a restart nor a flood of strangers resets the limits.
"""

from __future__ import annotations

import secrets
from typing import Literal

import msgspec

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
"""31 symbols: A-Z and 2-9 without 0, O, 1, I and L."""
CODE_LENGTH = 8


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def normalize_code(text: str) -> str:
    """What the operator typed, as stored: case, spaces and dashes do not matter."""
    return "".join(ch for ch in text.upper() if ch not in " -_\t")


def looks_like_code(code: str) -> bool:
    return len(code) == CODE_LENGTH and all(ch in CODE_ALPHABET for ch in code)


class PairingLimits(msgspec.Struct, frozen=True):
    """How long a code lives and what bounds what strangers can make the store hold."""

    code_ttl_seconds: float = 3600.0
    max_pending: int = 20
    """Live codes per platform; a stranger past that gets no code (refused, nothing stored)."""
    reply_interval_seconds: float = 600.0
    """A stranger who keeps writing is sent their code again at most this often."""
    max_failed_approvals: int = 5
    """Wrong codes in a row that lock ``approve`` ..."""
    lockout_seconds: float = 900.0
    """... for this long (a correct code is refused too while locked)."""


class PairingRequest(msgspec.Struct, frozen=True):
    """A live code: who asked, where, and until when it can be approved."""

    code: str
    platform: str
    user_id: str
    user_name: str | None
    chat_id: str | None
    created_at: float
    expires_at: float


class PairingIssue(msgspec.Struct, frozen=True):
    """What ``request_pairing`` decided for one message of a stranger."""

    request: PairingRequest | None
    """The user's live code (new or still valid); ``None`` when the platform's pending list is full."""
    replied: bool
    """Whether a reply with the code was recorded (first message, or the reply interval passed)."""


class PairedUser(msgspec.Struct, frozen=True):
    platform: str
    user_id: str
    user_name: str | None
    approved_at: float
    code: str | None


ApproveOutcome = Literal["approved", "unknown", "expired", "locked"]


class PairingApproval(msgspec.Struct, frozen=True):
    """The result of ``approve_pairing``: approved, or why not."""

    outcome: ApproveOutcome
    user: PairedUser | None = None
    locked_until: float | None = None
    failures: int = 0
    """Wrong codes in a row so far (reset by a success or when a lockout ends)."""
