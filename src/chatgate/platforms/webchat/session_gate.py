"""Who a web request or socket is: the session cookie, checked against the store, and the
checks that keep another site from acting with it (Origin, CSRF token).

Every check fails closed: no cookie, an unknown, ended or expired session, a revoked user,
a store that cannot answer, a missing or foreign ``Origin``, a missing or wrong CSRF token:
each is refused, and each refusal is logged with its reason.
"""

from __future__ import annotations

import logging
import time
from urllib.parse import urlsplit

import msgspec
from starlette.requests import HTTPConnection

from chatgate.domain.accounts import SignedIn, csrf_matches, hash_secret, session_id_of
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.log_budget import LogBudget
from chatgate.domain.store_roles import Accounts
from chatgate.platforms.kit.trust import vouch

log = logging.getLogger(__name__)

COOKIE = "chatgate_session"
CSRF_HEADER = "x-csrf-token"


class Refusal(msgspec.Struct, frozen=True):
    status: int
    code: str
    message: str


NOT_SIGNED_IN = Refusal(401, "not_signed_in", "sign in first (/signin)")


def client_of(conn: HTTPConnection) -> str:
    return conn.client.host if conn.client else "?"


def _own_origin(conn: HTTPConnection) -> str:
    scheme = "https" if conn.url.scheme in ("https", "wss") else "http"
    return f"{scheme}://{conn.headers.get('host', '').lower()}"


class SessionGate:
    """The account checks of the web chat's HTTP routes and its socket."""

    def __init__(self, store: Accounts, allowed_origins: frozenset[str], secure_cookies: bool | None) -> None:
        self.store = store
        self.allowed_origins = allowed_origins
        self.secure_cookies = secure_cookies
        self.refusals = LogBudget(log)

    def origin_problem(self, conn: HTTPConnection) -> Refusal | None:
        """A browser names the page that sent a request; it must be this gateway's own (or allowed)."""
        origin = conn.headers.get("origin")
        if origin is None:
            return Refusal(
                403, "origin_required", "this request must come from the web chat page (no Origin)"
            )
        origin = origin.rstrip("/").lower()
        parsed = urlsplit(origin)
        own = _own_origin(conn)
        # The scheme is the connection's, or what a trusted proxy forwarded (http.trusted_proxies);
        # an X-Forwarded-Proto header from anyone else never reaches this far.
        same = parsed.netloc == own.split("://", 1)[1] and parsed.scheme == own.split("://", 1)[0]
        if same or origin in self.allowed_origins:
            return None
        return Refusal(
            403, "cross_origin", f"requests from {origin} are refused (platforms.web.allowed_origins)"
        )

    async def signed_in(self, conn: HTTPConnection) -> SignedIn | Refusal:
        cookie = conn.cookies.get(COOKIE)
        if not cookie or session_id_of(cookie) is None:
            return NOT_SIGNED_IN
        try:
            found = await self.store.signed_in(hash_secret(cookie), time.time())
        except StoreUnavailable as exc:
            log.warning("could not check a web session: %s", exc, extra={"code": "storage_unavailable"})
            return Refusal(503, "storage_unavailable", f"could not check the session: {exc}; try again")
        if found is None:
            return NOT_SIGNED_IN
        vouch(conn)  # a signed-in user's connection: never pushed out for a stranger's
        return found

    async def for_change(self, conn: HTTPConnection) -> SignedIn | Refusal:
        """A state-changing request: a valid session, our Origin, and the session's CSRF token."""
        if (problem := self.origin_problem(conn)) is not None:
            return problem
        found = await self.signed_in(conn)
        if isinstance(found, Refusal):
            return found
        sent = conn.headers.get(CSRF_HEADER, "")
        if not sent or not csrf_matches(conn.cookies.get(COOKIE, ""), sent):
            return Refusal(403, "csrf", f"missing or wrong {CSRF_HEADER} header; reload the page")
        return found

    async def for_socket(self, conn: HTTPConnection) -> SignedIn | Refusal:
        """The WebSocket handshake: our Origin (browsers always send one) and a valid session."""
        if (problem := self.origin_problem(conn)) is not None:
            return problem
        return await self.signed_in(conn)

    def refused(self, conn: HTTPConnection, refusal: Refusal, what: str) -> None:
        """One line per refusal, within a budget per kind: strangers cause these (wrong passwords,
        foreign origins, expired cookies), and must not flood the log. ``client`` is the real
        peer, or the client a trusted proxy forwarded, never a header anyone may send."""
        self.refusals.warning(
            f"web {what}: {refusal.code}",
            "web chat %s refused: %s (%s)",
            what,
            refusal.message,
            refusal.code,
            extra={"code": refusal.code, "client": client_of(conn), "path": conn.url.path},
        )

    def secure(self, conn: HTTPConnection) -> bool:
        if self.secure_cookies is not None:
            return self.secure_cookies
        return conn.url.scheme in ("https", "wss")
