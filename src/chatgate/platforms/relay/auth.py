"""The relay upgrade token (Hermes relay contract v1, section 6.1).

``base64url(f"{gateway_id}:{exp}:{sig}")`` without padding, where ``sig`` is the
hex HMAC-SHA256 of ``f"{gateway_id}:{exp}"`` under the per-gateway secret and
``exp`` is a unix time. A fresh token is minted for every dial, so a long outage
never presents an expired one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

DEFAULT_TTL_SECONDS = 300


def sign(message: str, secret: str) -> str:
    return hmac.new(secret.encode(), message.encode(), hashlib.sha256).hexdigest()


def make_upgrade_token(
    gateway_id: str, secret: str, ttl_seconds: int = DEFAULT_TTL_SECONDS, now: float | None = None
) -> str:
    if ":" in gateway_id:
        raise ValueError("a relay gateway id cannot contain ':'")
    issued = time.time() if now is None else now
    exp = int(issued) + ttl_seconds
    signed = f"{gateway_id}:{exp}"
    raw = f"{signed}:{sign(signed, secret)}".encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
