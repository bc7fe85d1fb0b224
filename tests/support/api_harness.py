"""Helpers for the API tests: a real in-process gateway with ``platforms.api`` on, a key, and clients
(the official ``openai`` client and raw ``httpx``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import openai

from chatgate.app.gateway import Gateway
from chatgate.domain.api_keys import ApiKeyRecord, hash_token, new_api_key

TIMEOUT = 60.0
"""Generous: a loaded 2-core machine; nothing healthy waits this long."""


def api_config(**api: Any) -> dict[str, Any]:
    return {"platforms": {"api": {"enabled": True, **api}}}


@dataclass
class ApiWorld:
    gateway: Gateway
    token: str
    key_id: str

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.gateway.port}"

    def client(self, token: str | None = None, **options: Any) -> openai.AsyncOpenAI:
        options.setdefault("max_retries", 0)
        return openai.AsyncOpenAI(
            api_key=token or self.token, base_url=f"{self.base}/v1", timeout=TIMEOUT, **options
        )

    def http(self, token: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token or self.token}"}
        return httpx.AsyncClient(base_url=self.base, headers=headers, timeout=TIMEOUT)

    async def new_key(self, name: str = "other") -> tuple[str, str]:
        key_id, token = new_api_key()
        await self.gateway.store.create_api_key(ApiKeyRecord(key_id, name, time.time()), hash_token(token))
        return key_id, token


async def poll_until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = TIMEOUT) -> None:
    """Ask ``check`` (an HTTP fetch) every 0.1 s until it is true; fail naming ``what``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)
