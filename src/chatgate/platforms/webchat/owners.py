"""Who asks for a conversation over HTTP: the owner id the conversation routes serve.

With accounts, the session cookie says (and a change needs our Origin and the CSRF token).
Without (``auth: none`` on loopback, or one shared ``token``), a conversation belongs to the
browser that opened it: the random user id the page keeps in ``localStorage`` and says in
its hello. The page sends it in ``X-Chatgate-User`` (and the shared token in
``X-Chatgate-Token``); a custom header also means no other site's page can send the request
without a CORS preflight, which is never answered. On a loopback bind the ``Host`` must be a
loopback name, so a DNS-rebinding page (a name of the attacker's) is refused too.
"""

from __future__ import annotations

import hmac
from typing import Protocol

import msgspec
from starlette.requests import HTTPConnection

from chatgate.platforms.kit.origins import names_this_host, origin_allowed
from chatgate.platforms.webchat.session_gate import Refusal, SessionGate

USER_HEADER = "x-chatgate-user"
TOKEN_HEADER = "x-chatgate-token"
MAX_USER_ID_CHARS = 200


class Owner(msgspec.Struct, frozen=True):
    user_id: str
    name: str
    """For the log: the account's name, or the browser's user id."""


class ChatOwners(Protocol):
    async def reader(self, conn: HTTPConnection) -> Owner | Refusal:
        """The owner a read (list, history, export) is for."""
        ...

    async def changer(self, conn: HTTPConnection) -> Owner | Refusal:
        """The owner a change (rename, delete) is for, with the cross-site checks of a change."""
        ...


class SignedOwners:
    """``auth: accounts``: the signed-in account."""

    def __init__(self, gate: SessionGate) -> None:
        self.gate = gate

    async def reader(self, conn: HTTPConnection) -> Owner | Refusal:
        found = await self.gate.signed_in(conn)
        return found if isinstance(found, Refusal) else Owner(found.account.user_id, found.account.name)

    async def changer(self, conn: HTTPConnection) -> Owner | Refusal:
        found = await self.gate.for_change(conn)
        if isinstance(found, Refusal):
            self.gate.refused(conn, found, "conversation change")
            return found
        return Owner(found.account.user_id, found.account.name)


class BrowserOwners:
    """``auth: none`` or ``token``: the browser's own user id, behind the shared token if any."""

    def __init__(self, token: str | None, allowed_origins: frozenset[str], loopback_bind: bool) -> None:
        self.token = token
        self.allowed_origins = allowed_origins
        self.loopback_bind = loopback_bind

    async def reader(self, conn: HTTPConnection) -> Owner | Refusal:
        if self.loopback_bind and not names_this_host(conn, self.allowed_origins):
            return Refusal(403, "cross_origin", "this gateway answers only to its own address")
        if not origin_allowed(conn, self.allowed_origins, self.loopback_bind):
            return Refusal(
                403, "cross_origin", "requests from other sites are refused (platforms.web.allowed_origins)"
            )
        if self.token is not None and not hmac.compare_digest(
            conn.headers.get(TOKEN_HEADER, "").encode(), self.token.encode()
        ):
            return Refusal(401, "unauthorized", f"this web chat needs its access token in {TOKEN_HEADER}")
        user = conn.headers.get(USER_HEADER, "")
        if not 1 <= len(user) <= MAX_USER_ID_CHARS or user.startswith("!"):
            return Refusal(
                400,
                "invalid_request",
                f"{USER_HEADER} must be the page's user id (1 to {MAX_USER_ID_CHARS} characters)",
            )
        return Owner(user, user)

    async def changer(self, conn: HTTPConnection) -> Owner | Refusal:
        if conn.headers.get("origin") is None:
            return Refusal(
                403, "origin_required", "this request must come from the web chat page (no Origin)"
            )
        return await self.reader(conn)
