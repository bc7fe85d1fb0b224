"""Fixtures of the Matrix tests: the worker's Synapse (one per xdist worker, started once and
reused), the people of a test, and real in-process gateways pointed at them."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from matrix.harness import TOKEN_ENV, People
from matrix.homeserver import Account, Synapse, start_synapse
from support.procs import free_port

STOP_TIMEOUT = 30.0


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    """One homeserver per test worker, started on first use and reused by every Matrix test."""
    server = start_synapse(tmp_path_factory.mktemp("synapse"), free_port())
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (Path(server.data) / "started_in.txt").write_text(f"{worker} {server.started_in:.3f}\n")
    print(f"\nSynapse ({worker}) answered {server.started_in:.2f}s after its start")
    yield server
    server.stop()


@pytest.fixture
async def people(synapse: Synapse) -> AsyncIterator[People]:
    async with aiohttp.ClientSession() as http:
        yield People(synapse, http)


class Gateways:
    """Real in-process gateways on ``tmp_path`` (their bot's token in ``TOKEN_ENV``), all stopped at
    the end."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp_path, self._env = tmp_path, monkeypatch
        self.started: list[Any] = []

    async def start(self, config: dict[str, Any], bot: Account, state: str = "state") -> Any:
        from chatgate.app.config import GatewayConfig
        from chatgate.app.gateway import Gateway
        from chatgate.platforms.kit.conform import conform

        self._env.setenv(TOKEN_ENV, bot.token)
        gateway = Gateway(conform(GatewayConfig, config), self.tmp_path / state)
        try:
            await gateway.start()
        except BaseException:
            await asyncio.wait_for(gateway.stop(), STOP_TIMEOUT)
            raise
        self.started.append(gateway)
        return gateway

    async def stop(self, gateway: Any) -> None:
        self.started.remove(gateway)
        await asyncio.wait_for(gateway.stop(), STOP_TIMEOUT)


@pytest.fixture
async def gateways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Gateways]:
    harness = Gateways(tmp_path, monkeypatch)
    yield harness
    for gateway in reversed(list(harness.started)):
        await harness.stop(gateway)
