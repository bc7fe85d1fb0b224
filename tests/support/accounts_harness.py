"""Helpers for the web chat account tests: users made in the store before the gateway starts,
sign-in over real HTTP, and WebSocket clients that carry the session cookie and an Origin.

A gateway with ``platforms.web.auth: accounts`` refuses to start without a user, so each
test makes its users in the SQLite file first (``seed``) and starts the gateway on that file.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import websockets

from chatgate.app.config import GatewayConfig
from chatgate.domain.accounts import (
    Account,
    SignInToken,
    hash_password,
    hash_secret,
    new_id,
    new_sign_in_token,
)
from chatgate.store.sqlite import SqliteStore
from support.web_harness import FRAME_TIMEOUT, WebClient, web_config


@dataclass(frozen=True)
class User:
    account: Account
    token_id: str
    token: str


def accounts_config(**web: Any) -> GatewayConfig:
    """A loopback gateway whose web chat asks people to sign in (``web`` overrides its keys)."""
    return web_config(platforms={"web": {"auth": "accounts", **web}})


async def seed(
    path: Path, *users: tuple[str, str], password: dict[str, str] | None = None
) -> dict[str, User]:
    """``(name, role)`` users in the SQLite file at ``path``, each with one sign-in token."""
    store = SqliteStore(path)
    await store.open()
    made: dict[str, User] = {}
    try:
        for name, role in users:
            pw = (password or {}).get(name)
            account = Account(new_id(), name, "admin" if role == "admin" else "user", time.time())
            assert await store.create_account(account, hash_password(pw) if pw else None)
            token_id, token = new_sign_in_token()
            await store.add_sign_in_token(
                SignInToken(token_id, account.user_id, time.time()), hash_secret(token)
            )
            made[name] = User(account, token_id, token)
    finally:
        await store.close()
    return made


def origin(port: int | None) -> str:
    return f"http://127.0.0.1:{port}"


@dataclass
class Session:
    """A signed-in HTTP client: its cookie jar holds the session; ``csrf`` is the session's token."""

    http: httpx.AsyncClient
    csrf: str
    cookie: str
    name: str

    async def post(self, path: str, body: dict[str, Any] | None = None, **headers: str) -> httpx.Response:
        sent = {"Origin": str(self.http.base_url).rstrip("/"), "X-CSRF-Token": self.csrf, **headers}
        return await self.http.post(path, json=body or {}, headers=sent)


async def sign_in(port: int | None, body: dict[str, str]) -> Session:
    http = httpx.AsyncClient(base_url=origin(port))
    res = await http.post("/api/signin", json=body, headers={"Origin": origin(port)})
    assert res.status_code == 200, res.text
    return Session(http, res.json()["csrf"], http.cookies["chatgate_session"], res.json()["name"])


async def socket(port: int | None, cookie: str | None, *, with_origin: str | None = "own") -> WebClient:
    """A /ws client sending the session cookie and an Origin (``own``: the gateway's own)."""
    headers: dict[str, str] = {}
    if cookie is not None:
        headers["Cookie"] = f"chatgate_session={cookie}"
    if with_origin is not None:
        headers["Origin"] = origin(port) if with_origin == "own" else with_origin
    ws = await websockets.connect(
        f"ws://127.0.0.1:{port}/ws", additional_headers=headers, open_timeout=FRAME_TIMEOUT
    )
    return WebClient(ws)
