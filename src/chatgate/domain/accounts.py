"""Web chat accounts: users, their sign-in tokens and passwords, and browser sessions.

Nothing secret is kept in clear. A sign-in token (``cgu-<token id>-<secret>``) and a
session cookie (``cgs-<session id>-<secret>``) carry 256 random bits, so their SHA-256 is
as safe at rest as a slow hash and costs nothing per request. A password is chosen by a
person, so it is kept as an scrypt hash with its own salt (slow on purpose: callers run
``hash_password`` and ``password_matches`` in a thread). Ids are public: they name a token
or session in ``chatgate user list`` and in the admin view.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Literal

import msgspec

Role = Literal["user", "admin"]
ROLES: tuple[Role, ...] = ("user", "admin")
NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
"""A user name: lower case, what a person types at the sign-in page and the CLI takes."""
ID_RE = re.compile(r"[0-9a-f]{12}")
_SIGN_IN_RE = re.compile(r"cgu-([0-9a-f]{12})-[A-Za-z0-9_-]{43}")
_SESSION_RE = re.compile(r"cgs-([0-9a-f]{12})-[A-Za-z0-9_-]{43}")

# scrypt's cost: 2**15 * 8 * 128 bytes = 32 MiB of memory and about 0.1 s per hash.
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**15, 8, 1
_SCRYPT_MAXMEM = 64 * 1024 * 1024
MAX_PASSWORD_CHARS = 1024


class Account(msgspec.Struct, frozen=True):
    user_id: str
    name: str
    role: Role
    created_at: float
    revoked_at: float | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class SignInToken(msgspec.Struct, frozen=True):
    token_id: str
    user_id: str
    created_at: float
    revoked_at: float | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class WebSession(msgspec.Struct, frozen=True):
    """A signed-in browser; ``via`` is the sign-in token it came from (None: a password)."""

    session_id: str
    user_id: str
    created_at: float
    expires_at: float
    via: str | None = None
    ended_at: float | None = None

    def valid(self, now: float) -> bool:
        return self.ended_at is None and now < self.expires_at


class SignedIn(msgspec.Struct, frozen=True):
    """What a valid session cookie resolves to: the session and its (active) account."""

    session: WebSession
    account: Account


def new_id() -> str:
    return secrets.token_hex(6)


def new_sign_in_token() -> tuple[str, str]:
    """``(token id, token)``: the token is printed once, by ``chatgate user add``."""
    token_id = new_id()
    return token_id, f"cgu-{token_id}-{secrets.token_urlsafe(32)}"


def new_session_cookie() -> tuple[str, str]:
    """``(session id, cookie value)``."""
    session_id = new_id()
    return session_id, f"cgs-{session_id}-{secrets.token_urlsafe(32)}"


def sign_in_token_id(token: str) -> str | None:
    """The id a well-formed sign-in token names (None for anything else, before any lookup)."""
    match = _SIGN_IN_RE.fullmatch(token)
    return match.group(1) if match else None


def session_id_of(cookie: str) -> str | None:
    match = _SESSION_RE.fullmatch(cookie)
    return match.group(1) if match else None


def hash_secret(value: str) -> str:
    """SHA-256 of a high-entropy token or cookie: what the store keeps and looks up by."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def csrf_token(cookie: str) -> str:
    """The CSRF token of a session: derived from its cookie, so nothing more is stored, and
    a page on another site, which cannot read the cookie, cannot compute it."""
    return hashlib.sha256(b"chatgate-csrf\x00" + cookie.encode("utf-8")).hexdigest()


def csrf_matches(cookie: str, sent: str) -> bool:
    return hmac.compare_digest(csrf_token(cookie), sent)


def hash_password(password: str) -> str:
    """``scrypt$N$r$p$salt$hash`` (hex). CPU- and memory-heavy: call it in a thread."""
    salt = secrets.token_bytes(16)
    digest = _scrypt(password, salt, _SCRYPT_N, _SCRYPT_R, _SCRYPT_P)
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${salt.hex()}${digest.hex()}"


def password_matches(password: str, stored: str | None) -> bool:
    """Constant-time check against ``hash_password``'s output; False for anything malformed.

    With no stored hash it still hashes once, so a name without a password takes as long
    to refuse as a wrong password (the timing does not tell which names exist)."""
    parts = (stored or "").split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        _scrypt(password, b"\x00" * 16, _SCRYPT_N, _SCRYPT_R, _SCRYPT_P)
        return False
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt, want = bytes.fromhex(parts[4]), bytes.fromhex(parts[5])
    except ValueError:
        return False
    if not (2 <= n <= 2**20 and 1 <= r <= 32 and 1 <= p <= 16):
        return False
    return hmac.compare_digest(_scrypt(password, salt, n, r, p), want)


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        password[:MAX_PASSWORD_CHARS].encode("utf-8"),
        salt=salt,
        n=n,
        r=r,
        p=p,
        maxmem=_SCRYPT_MAXMEM,
        dklen=32,
    )


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a user name, or None."""
    if NAME_RE.fullmatch(name):
        return None
    return f"{name!r} is not a user name: 1-64 of a-z 0-9 . _ - (lower case), starting with a letter or digit"
