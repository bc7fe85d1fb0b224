#!/usr/bin/env python
"""What accounts cost on the web chat: a password hash, a sign-in, a session check, and a
page of server history, against an in-process gateway on 127.0.0.1 (SQLite, synchronous=FULL,
the echo agent with no delay).

- ``password_hash_ms``: one scrypt hash (the cost of every password sign-in, in a thread);
- ``sign_in_token_ms``: ``POST /api/signin`` with a token, one at a time (p50, p95);
- ``me_ms``: ``GET /api/me`` (the session lookup every request and handshake makes);
- ``history_ms``: ``GET /api/conversations/{id}/messages?limit=100`` of a chat with N messages;
- ``search_ms``: ``GET /api/conversations?q=`` over C chats of N messages in all.

Prints one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import websockets

from chatgate.app.config import GatewayConfig
from chatgate.app.gateway import Gateway
from chatgate.domain.accounts import (
    Account,
    SignInToken,
    hash_password,
    hash_secret,
    new_id,
    new_sign_in_token,
)
from chatgate.platforms.kit.conform import conform
from chatgate.store.sqlite import SqliteStore


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered) * 1000, 3),
        "p95": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 3),
    }


async def seed(path: Path) -> str:
    store = SqliteStore(path)
    await store.open()
    account = Account(new_id(), "bench", "user", time.time())
    await store.create_account(account, None)
    token_id, token = new_sign_in_token()
    await store.add_sign_in_token(SignInToken(token_id, account.user_id, time.time()), hash_secret(token))
    await store.close()
    return token


async def fill(port: int, cookie: str, chats: int, messages: int) -> None:
    headers = {"Cookie": f"chatgate_session={cookie}", "Origin": f"http://127.0.0.1:{port}"}
    async with websockets.connect(f"ws://127.0.0.1:{port}/ws", additional_headers=headers) as ws:
        for chat in range(chats):
            await ws.send(json.dumps({"type": "hello", "chat_id": f"c{chat}", "user_id": "x"}))
            assert json.loads(await ws.recv())["type"] == "ready"
            for i in range(messages // chats):
                await ws.send(
                    json.dumps({"type": "message", "id": f"m{chat}-{i}", "text": f"note {chat} {i}"})
                )
                while True:
                    frame = json.loads(await ws.recv())
                    if frame["type"] == "final":
                        await ws.send(json.dumps({"type": "received", "message_id": frame["message_id"]}))
                        break


async def timed(http: httpx.AsyncClient, n: int, call: Any) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        res = await call(http)
        samples.append(time.perf_counter() - start)
        assert res.status_code == 200, res.text
    return samples


async def run(args: argparse.Namespace) -> dict[str, Any]:
    load_before = list(os.getloadavg())
    hashes = []
    for _ in range(5):
        start = time.perf_counter()
        await asyncio.to_thread(hash_password, "a password of some length")
        hashes.append(time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        token = await seed(db)
        config = conform(
            GatewayConfig,
            dict(
                http={"port": 0},
                agent={"echo": {"chunk_delay_ms": 0}},
                platforms={"web": {"auth": "accounts", "sign_in_attempts_per_minute": 10_000}},
            ),
        )
        gateway = Gateway(config, Path(tmp) / "state", store=SqliteStore(db))
        await gateway.start()
        try:
            base = f"http://127.0.0.1:{gateway.port}"
            async with httpx.AsyncClient(base_url=base, headers={"Origin": base}) as http:
                signins = await timed(
                    http, args.requests, lambda h: h.post("/api/signin", json={"token": token})
                )
                cookie = http.cookies["chatgate_session"]
                log(f"filling {args.chats} chats with {args.messages} messages")
                await fill(gateway.port or 0, cookie, args.chats, args.messages)
                me = await timed(http, args.requests, lambda h: h.get("/api/me"))
                history = await timed(
                    http, args.requests, lambda h: h.get("/api/conversations/c0/messages?limit=100")
                )
                search = await timed(http, args.requests, lambda h: h.get("/api/conversations?q=note 0 1"))
        finally:
            await gateway.stop()
    return {
        "bench": "accounts",
        "load_before": load_before,
        "load_after": list(os.getloadavg()),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "chats": args.chats,
        "messages": args.messages,
        "password_hash_ms": summary(hashes),
        "sign_in_token_ms": summary(signins),
        "me_ms": summary(me),
        "history_ms": summary(history),
        "search_ms": summary(search),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="requests per measured endpoint")
    parser.add_argument("--chats", type=int, default=10)
    parser.add_argument("--messages", type=int, default=500, help="messages in all, spread over the chats")
    parser.add_argument(
        "--quick", action="store_true", help="a small smoke run (20 requests, 2 chats, 20 messages)"
    )
    args = parser.parse_args()
    if args.quick:
        args.requests, args.chats, args.messages = 20, 2, 20
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
