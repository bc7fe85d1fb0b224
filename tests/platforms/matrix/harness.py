"""Helpers of the Matrix tests: people on the worker's Synapse, the gateway config that points
at them, and waiting for what the server shows."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from matrix.client import Person
from matrix.homeserver import Account, Synapse

TOKEN_ENV = "MATRIX_TEST_BOT_TOKEN"


class People:
    """Accounts of this test and one HTTP session for their clients."""

    def __init__(self, server: Synapse, http: aiohttp.ClientSession) -> None:
        self.server, self.http = server, http

    def person(self, name: str, limit: tuple[int, int] | None = (0, 0)) -> Person:
        return Person(self.server, self.server.register(name, limit=limit), self.http)

    def account(self, name: str, limit: tuple[int, int] | None = (0, 0)) -> Account:
        return self.server.register(name, limit=limit)


def matrix_config(
    server: Synapse, bot: Account, tmp_path: Path, *, section: dict[str, Any] | None = None, **overrides: Any
) -> dict[str, Any]:
    """A gateway config with only Matrix enabled (the token in ``TOKEN_ENV``: set it)."""
    matrix: dict[str, Any] = {
        "enabled": True,
        "homeserver": server.base,
        "user_id": bot.user_id,
        "access_token_env": TOKEN_ENV,
        "allow_all": True,
        "sync_timeout_seconds": 5,
    }
    matrix.update(section or {})
    values: dict[str, Any] = {
        "http": {"port": 0},
        "agent": {"echo": {"chunk_delay_ms": 2}},
        "platforms": {"web": {"enabled": False}, "matrix": matrix},
        "locks": {"credential_dir": str(tmp_path / "locks")},
        "shutdown": {"drain_seconds": 5, "outbox_flush_seconds": 2},
        "delivery": {"duplicate_marker": "(possible repeat) "},
    }
    values.update(overrides)
    return values


async def wait_for(predicate: Callable[[], Any], timeout: float, what: str, every: float = 0.1) -> Any:
    """Poll an async or plain ``predicate`` until it gives something true; fail naming ``what``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(every)


async def joined(person: Person, room: str, user_id: str, timeout: float = 30) -> None:
    async def has() -> bool:
        return user_id in await person.members(room)

    await wait_for(has, timeout, f"{user_id} to join {room}")


def echo_of(text: str) -> str:
    return f"echo: {text}"
