"""The account routes of the web chat: the sign-in page, sign in and out, who am I, and the
admin's users and revocations. JSON in and out; every refusal is a structured, logged error."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from chatgate.domain.accounts import (
    Account,
    SignedIn,
    SignInToken,
    WebSession,
    csrf_token,
    hash_secret,
    name_problem,
    new_id,
    new_session_cookie,
    new_sign_in_token,
    password_matches,
    sign_in_token_id,
)
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.store_roles import Accounts
from chatgate.platforms.kit.trust import vouch
from chatgate.platforms.webchat.attempts import SignInAttempts, address_key
from chatgate.platforms.webchat.bodies import AddUser, BodyError, Revoke, SignIn, read_body
from chatgate.platforms.webchat.pages import PAGE_HEADERS, page
from chatgate.platforms.webchat.session_gate import COOKIE, Refusal, SessionGate, client_of

log = logging.getLogger(__name__)

WRONG = Refusal(
    401, "sign_in_failed", "that sign-in was not accepted; check the token or the name and password"
)


class OpenSockets(Protocol):
    """The adapter's side of a revocation: close the sockets of sessions that ended."""

    def end_sessions(self, session_ids: set[str] | None) -> None:
        """Close the sockets of these sessions now; None: re-check every open socket now."""
        ...


def error(refusal: Refusal) -> JSONResponse:
    return JSONResponse({"error": refusal.code, "message": refusal.message}, status_code=refusal.status)


def whoami(found: SignedIn, cookie: str) -> dict[str, Any]:
    account = found.account
    return {
        "name": account.name,
        "role": account.role,
        "user_id": account.user_id,
        "csrf": csrf_token(cookie),
    }


def _account_key(body: SignIn) -> str:
    """The account a sign-in tries: its name, or the id part of a token (the rest is the secret)."""
    if body.token:
        return f"token:{sign_in_token_id(body.token) or '?'}"
    return f"name:{body.name or ''}"


class AccountDesk:
    """Signs people in and out, and lets an admin see and revoke."""

    def __init__(
        self,
        store: Accounts,
        gate: SessionGate,
        attempts: SignInAttempts,
        session_seconds: float,
        sockets: OpenSockets,
    ) -> None:
        self.store = store
        self.gate = gate
        self.attempts = attempts
        """Per client address (``address_key``)."""
        self.per_account = SignInAttempts(attempts.per_minute, when_full="refuse")
        """Per account named (a name, or a sign-in token's id), whatever address asks."""
        self.session_seconds = session_seconds
        self.sockets = sockets

    async def _account_for(self, body: SignIn) -> tuple[Account, str | None] | Refusal:
        """The account a sign-in names and the token it used, or why not."""
        if body.token:
            token_id = sign_in_token_id(body.token)
            found = await self.store.sign_in_token_by_hash(hash_secret(body.token)) if token_id else None
            if found is None or not found[0].active or not found[1].active:
                return WRONG
            return found[1], found[0].token_id
        if body.name and body.password:
            row = await self.store.account_by_name(body.name)
            stored = row[1] if row is not None else None
            ok = await asyncio.to_thread(password_matches, body.password, stored)
            if row is None or not ok or not row[0].active:
                return WRONG
            return row[0], None
        return Refusal(400, "invalid_request", "send a sign-in token, or a name and a password")

    async def sign_in(self, request: Request) -> Response:
        if (problem := self.gate.origin_problem(request)) is not None:
            self.gate.refused(request, problem, "sign-in")
            return error(problem)
        wait = self.attempts.admit(address_key(client_of(request)))
        if wait is not None:
            return self._too_many(request, wait, "from this address")
        try:
            body = await read_body(request, SignIn)
            wait = self.per_account.admit(_account_key(body))
            if wait is not None:
                return self._too_many(request, wait, "for this account")
            found = await self._account_for(body)
            if isinstance(found, Refusal):
                self.gate.refused(request, found, "sign-in")
                return error(found)
            account, via = found
            session_id, cookie = new_session_cookie()
            now = time.time()
            session = WebSession(session_id, account.user_id, now, now + self.session_seconds, via)
            await self.store.create_web_session(session, hash_secret(cookie))
        except BodyError as exc:
            refusal = Refusal(400, exc.code, exc.message)
            self.gate.refused(request, refusal, "sign-in")
            return error(refusal)
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"could not sign in now: {exc}; try again"))
        log.info("web chat sign-in: %s (%s)", account.name, "token " + via if via else "password")
        vouch(request)
        response = JSONResponse(whoami(SignedIn(session, account), cookie))
        response.set_cookie(
            COOKIE,
            cookie,
            max_age=int(self.session_seconds),
            path="/",
            httponly=True,
            samesite="strict",
            secure=self.gate.secure(request),
        )
        return response

    def _too_many(self, request: Request, wait: float, where: str) -> Response:
        refusal = Refusal(429, "too_many_attempts", f"too many sign-in attempts {where}; wait {wait:.0f} s")
        self.gate.refused(request, refusal, "sign-in")
        return JSONResponse(
            {"error": refusal.code, "message": refusal.message},
            status_code=429,
            headers={"Retry-After": str(max(1, round(wait)))},
        )

    async def me(self, request: Request) -> Response:
        found = await self.gate.signed_in(request)
        if isinstance(found, Refusal):
            return error(found)
        return JSONResponse(whoami(found, request.cookies.get(COOKIE, "")))

    async def sign_out(self, request: Request) -> Response:
        found = await self.gate.for_change(request)
        if isinstance(found, Refusal):
            self.gate.refused(request, found, "sign-out")
            return error(found)
        try:
            await self.store.end_web_session(found.session.session_id, time.time())
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"could not sign out now: {exc}; try again"))
        self.sockets.end_sessions({found.session.session_id})
        response = JSONResponse({"signed_out": True})
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    async def _admin(self, request: Request, change: bool) -> SignedIn | Response:
        found = await (self.gate.for_change(request) if change else self.gate.signed_in(request))
        if not isinstance(found, Refusal) and found.account.role != "admin":
            found = Refusal(403, "not_admin", "only an admin may do this (chatgate user add NAME --admin)")
        if isinstance(found, Refusal):
            self.gate.refused(request, found, "admin request")
            return error(found)
        return found

    async def users(self, request: Request) -> Response:
        admin = await self._admin(request, change=False)
        if isinstance(admin, Response):
            return admin
        try:
            accounts, tokens = await self.store.list_accounts(), await self.store.list_sign_in_tokens()
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"could not list users: {exc}"))
        return JSONResponse(
            {
                "users": [
                    {
                        "name": a.name,
                        "role": a.role,
                        "active": a.active,
                        "created_at": a.created_at,
                        "tokens": [
                            {"token_id": t.token_id, "active": t.active, "created_at": t.created_at}
                            for t in tokens
                            if t.user_id == a.user_id
                        ],
                    }
                    for a in accounts
                ]
            }
        )

    async def revoke(self, request: Request) -> Response:
        admin = await self._admin(request, change=True)
        if isinstance(admin, Response):
            return admin
        try:
            body = await read_body(request, Revoke)
            done = await self._revoke(body)
        except BodyError as exc:
            return error(Refusal(400, exc.code, exc.message))
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"could not revoke: {exc}; try again"))
        if isinstance(done, Refusal):
            return error(done)
        log.info("web chat admin %s revoked %s", admin.account.name, done)
        self.sockets.end_sessions(None)
        return JSONResponse({"revoked": done})

    async def add_user(self, request: Request) -> Response:
        """A new user and their first sign-in token, shown in this answer only (as by
        ``chatgate user add``); the store keeps only its hash."""
        admin = await self._admin(request, change=True)
        if isinstance(admin, Response):
            return admin
        try:
            body = await read_body(request, AddUser)
            if (problem := name_problem(body.name)) is not None:
                return error(Refusal(400, "invalid_request", problem))
            account = Account(new_id(), body.name, "admin" if body.admin else "user", time.time())
            if not await self.store.create_account(account, None):
                return error(Refusal(409, "name_taken", f"there is already a user {body.name}"))
            token_id, value = new_sign_in_token()
            await self.store.add_sign_in_token(
                SignInToken(token_id, account.user_id, time.time()), hash_secret(value)
            )
        except BodyError as exc:
            return error(Refusal(400, exc.code, exc.message))
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"could not add the user: {exc}; try again"))
        log.info("web chat admin %s added %s %s", admin.account.name, account.role, account.name)
        shown = {"name": account.name, "role": account.role, "token_id": token_id, "token": value}
        return JSONResponse(shown, status_code=201, headers={"Cache-Control": "no-store"})

    async def _revoke(self, body: Revoke) -> str | Refusal:
        now = time.time()
        if body.token_id is not None:
            if await self.store.revoke_sign_in_token(body.token_id, now):
                return f"token {body.token_id}"
            return Refusal(404, "not_found", f"no active sign-in token {body.token_id}")
        if body.user is not None:
            row = await self.store.account_by_name(body.user)
            if row is not None and await self.store.revoke_account(row[0].user_id, now):
                return f"user {body.user}"
            return Refusal(404, "not_found", f"no active user {body.user}")
        return Refusal(400, "invalid_request", "name a user or a token_id to revoke")


def account_routes(desk: AccountDesk) -> list[BaseRoute]:
    sign_in_page = page("signin.html")

    async def show_sign_in(request: Request) -> Response:
        return HTMLResponse(sign_in_page, headers=PAGE_HEADERS)

    def route(path: str, fn: Callable[[Request], Awaitable[Response]], method: str) -> Route:
        return Route(path, fn, methods=[method])

    return [
        route("/signin", show_sign_in, "GET"),
        route("/api/signin", desk.sign_in, "POST"),
        route("/api/signout", desk.sign_out, "POST"),
        route("/api/me", desk.me, "GET"),
        route("/api/admin/users", desk.users, "GET"),
        route("/api/admin/revoke", desk.revoke, "POST"),
        route("/api/admin/users/add", desk.add_user, "POST"),
    ]
