"""Relay bearer tokens: ``base64url("<gateway_id>:<exp>:<hex hmac>")`` without padding.

This is the simulator's own implementation of the contract, kept apart from the
gateway's, so that a test of one against the other checks the wire, not shared code.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
from collections.abc import Mapping, Sequence

_EXP = re.compile(r"[0-9]{1,20}")
_SIG = re.compile(r"[0-9a-f]{64}")
_B64URL = re.compile(r"[A-Za-z0-9_-]*")


class TokenRejected(Exception):
    """A token the relay must refuse; ``reason`` is the close reason, ``detail`` is for the log only."""

    def __init__(self, reason: str, detail: str, gateway_id: str | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.gateway_id = gateway_id


def sign(gateway_id: str, exp: int | str, secret: str) -> str:
    """Lowercase hex HMAC-SHA256 of ``"<gateway_id>:<exp>"`` keyed by the secret."""
    message = f"{gateway_id}:{exp}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def make_token(gateway_id: str, secret: str, exp: int = 0) -> str:
    """The bearer token a gateway presents; ``exp`` is unix seconds, 0 for never."""
    raw = f"{gateway_id}:{exp}:{sign(gateway_id, exp, secret)}".encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def verify_token(token: str | None, secrets: Mapping[str, Sequence[str]], *, now: float | None = None) -> str:
    """Return the gateway id the token proves, or raise ``TokenRejected``.

    The signature is checked before the expiry, so "expired" is only ever said
    to a holder of a valid secret. Every secret of the gateway's list is tried
    (rotation), each with a constant-time comparison.
    """
    if token is None:
        raise TokenRejected("unauthorized", "no bearer token")
    if not _B64URL.fullmatch(token):
        raise TokenRejected("unauthorized", "token is not unpadded base64url")
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("utf-8")
    except (binascii.Error, ValueError):
        raise TokenRejected("unauthorized", "token does not decode to UTF-8 text") from None
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise TokenRejected("unauthorized", "token is not <gateway_id>:<exp>:<sig>")
    gateway_id, exp_text, sig = parts
    if not _EXP.fullmatch(exp_text) or not _SIG.fullmatch(sig):
        raise TokenRejected("unauthorized", "malformed exp or signature", gateway_id)
    exp = int(exp_text)
    known = secrets.get(gateway_id, ())
    if not known:
        raise TokenRejected("unauthorized", "unknown or revoked gateway id", gateway_id)
    # Sign the exp text as received: "007" and "7" are different tokens.
    matches = [hmac.compare_digest(sign(gateway_id, exp_text, secret), sig) for secret in known]
    if not any(matches):
        raise TokenRejected("unauthorized", "signature matches none of the gateway's secrets", gateway_id)
    if exp != 0 and exp < (time.time() if now is None else now):
        raise TokenRejected("expired", f"token expired at {exp}", gateway_id)
    return gateway_id
