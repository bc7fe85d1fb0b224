"""Sign-in guesses cannot be multiplied by forged headers or fresh source addresses (issue 27, finding 8).

A real accounts gateway on 127.0.0.1 and real HTTP clients. On main, ``X-Forwarded-For`` was
believed from any loopback client (uvicorn's default), so a rotating header gave every guess a
fresh per-address budget (1,144 guesses/s) and the log named the forged address; and a client
binding 127.0.0.2, 127.0.0.3... had a budget per source address. Now forwarded headers count
only from ``http.trusted_proxies``, and attempts are limited per account as well as per address.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx

from chatgate.store.sqlite import SqliteStore
from support.accounts_harness import origin, seed
from support.web_harness import web_config

PER_MINUTE = 5
GUESS = {"name": "ann", "password": "not-her-password"}


async def _accounts(start_gateway: Any, tmp_path: Path, **http: Any) -> Any:
    db = tmp_path / "accounts.db"
    await seed(db, ("ann", "admin"), password={"ann": "correct horse battery staple"})
    config = web_config(
        http={"port": 0, **http},
        platforms={"web": {"auth": "accounts", "sign_in_attempts_per_minute": PER_MINUTE}},
    )
    return await start_gateway(config, store=SqliteStore(db))


async def _guess(port: int, *, source: str = "127.0.0.1", headers: dict[str, str] | None = None) -> int:
    transport = httpx.AsyncHTTPTransport(local_address=source)
    async with httpx.AsyncClient(base_url=origin(port), transport=transport, timeout=30) as http:
        sent = {"Origin": origin(port), **(headers or {})}
        return (await http.post("/api/signin", json=GUESS, headers=sent)).status_code


async def test_a_rotating_x_forwarded_for_does_not_multiply_the_budget_or_reach_the_log(
    start_gateway: Any, tmp_path: Path, caplog: Any
) -> None:
    gateway = await _accounts(start_gateway, tmp_path)
    with caplog.at_level(logging.WARNING, logger="chatgate.platforms.webchat"):
        codes = [await _guess(gateway.port, headers={"X-Forwarded-For": f"203.0.113.{n}"}) for n in range(40)]
    assert codes[:PER_MINUTE] == [401] * PER_MINUTE
    assert set(codes[PER_MINUTE:]) == {429}, codes
    clients = {getattr(r, "client", None) for r in caplog.records if "sign-in refused" in r.getMessage()}
    assert clients == {"127.0.0.1"}, "the log names the real peer, never the forged header"


async def test_fresh_source_addresses_do_not_multiply_the_budget_of_one_account(
    start_gateway: Any, tmp_path: Path
) -> None:
    gateway = await _accounts(start_gateway, tmp_path)
    codes = [await _guess(gateway.port, source=f"127.0.0.{n}") for n in range(2, 42)]
    assert codes[:PER_MINUTE] == [401] * PER_MINUTE
    assert set(codes[PER_MINUTE:]) == {429}, codes
    other = await _guess(gateway.port, source="127.0.0.99", headers=None)
    assert other == 429, "the account's budget is spent, whichever address asks"


async def test_a_trusted_proxy_s_forwarded_address_is_the_client_and_its_proto_counts(
    start_gateway: Any, tmp_path: Path, caplog: Any
) -> None:
    gateway = await _accounts(start_gateway, tmp_path, trusted_proxies=["127.0.0.0/8"])
    with caplog.at_level(logging.WARNING, logger="chatgate.platforms.webchat"):
        first = await _guess(gateway.port, headers={"X-Forwarded-For": "198.51.100.7"})
    assert first == 401
    clients = {getattr(r, "client", None) for r in caplog.records if "sign-in refused" in r.getMessage()}
    assert clients == {"198.51.100.7"}, "behind a trusted proxy the log names the client it forwarded"
    async with httpx.AsyncClient(base_url=origin(gateway.port), timeout=30) as http:
        headers = {"Origin": "https://chat.example", "Host": "chat.example", "X-Forwarded-Proto": "https"}
        signed_in = await http.post(
            "/api/signin", json={"name": "ann", "password": "correct horse battery staple"}, headers=headers
        )
    assert signed_in.status_code == 200, signed_in.text
    assert "secure" in signed_in.headers["set-cookie"].lower()


async def test_an_untrusted_peer_s_x_forwarded_proto_is_ignored(start_gateway: Any, tmp_path: Path) -> None:
    gateway = await _accounts(start_gateway, tmp_path)
    async with httpx.AsyncClient(base_url=origin(gateway.port), timeout=30) as http:
        headers = {"Origin": "https://chat.example", "Host": "chat.example", "X-Forwarded-Proto": "https"}
        forged = await http.post(
            "/api/signin", json={"name": "ann", "password": "correct horse battery staple"}, headers=headers
        )
    assert (forged.status_code, forged.json()["error"]) == (403, "cross_origin")
