"""A real relay simulator on 127.0.0.1 and real in-process gateways dialing it.

Gateways keep one state directory across restarts (``restart``), so a test can
stop one and start the next on the same SQLite file. The agent records every
request it gets (the pinned context and the turn input) and answers
``echo: <input>``; a turn whose input contains ``SLOW`` waits until released.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chatgate.agents.base import AgentEvent, AgentRequest, Final
from chatgate.app.config import GatewayConfig
from chatgate.app.gateway import Gateway
from chatgate.platforms.kit.conform import conform
from chatgate.platforms.relay.adapter import RelayHub
from chatgate.platforms.relay.platform import RelayPlatform
from relaysim import RelaySimulator

GW = "gw-test"
SECRET = "relay-test-secret"
WAIT = 20.0


class RecordingAgent:
    name = "recording"

    def __init__(self) -> None:
        self.requests: list[AgentRequest] = []
        self.release = asyncio.Event()
        self.started = asyncio.Event()

    async def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]:
        self.requests.append(request)
        if "SLOW" in request.model_input:
            self.started.set()
            await self.release.wait()
        yield Final(f"echo: {request.model_input}")

    async def aclose(self) -> None:
        return None


def relay_config(url: str, tmp: Path, extra: dict[str, Any] | None = None, **relay: Any) -> GatewayConfig:
    values: dict[str, Any] = {
        "enabled": True,
        "url": url,
        "gateway_id": GW,
        "secret_env": "CHATGATE_TEST_RELAY_SECRET",
        "platforms": [{"platform": "discord", "bot_id": "bot1", "allow_all": True}],
        "reconnect_initial_seconds": 0.05,
        "reconnect_max_seconds": 0.5,
        "outbound_timeout_seconds": 5,
    }
    values.update(relay)
    config: dict[str, Any] = {
        "http": {"port": 0},
        "platforms": {"web": {"enabled": False}, "relay": values},
        "locks": {"credential_dir": str(tmp / "locks")},
        "delivery": {"send_timeout_seconds": 10},
        "shutdown": {"drain_seconds": 2, "outbox_flush_seconds": 3, "adapter_close_seconds": 3},
    }
    config.update(extra or {})
    return conform(GatewayConfig, config)


class RelayWorld:
    def __init__(self, tmp: Path, sim: RelaySimulator) -> None:
        self.tmp = tmp
        self.sim = sim
        self.state_dir = tmp / "state"
        self.gateway: Gateway | None = None
        self.agent: Any = RecordingAgent()
        self.overrides: dict[str, Any] = {}
        self.extra: dict[str, Any] = {}
        """Other config sections (e.g. tools, approvals, agent); ``agent`` set to None uses the config's."""

    async def start(self, **relay: Any) -> Gateway:
        self.overrides.update(relay)
        config = relay_config(self.sim.base_url, self.tmp, self.extra, **self.overrides)
        self.gateway = Gateway(config, self.state_dir, agent=self.agent)
        await self.gateway.start()
        return self.gateway

    async def stop(self) -> None:
        if self.gateway is not None:
            await self.gateway.stop()
            self.gateway = None

    async def restart(self, **relay: Any) -> Gateway:
        await self.stop()
        if self.agent is not None:
            self.agent = RecordingAgent()
        return await self.start(**relay)

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(f"file:{self.state_dir / 'chatgate.db'}?mode=ro", uri=True)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    async def wait_for(self, probe: Any, what: str, timeout: float = WAIT) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = probe()
            if value:
                return value
            if loop.time() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.02)

    def ops(self, op: str) -> list[dict[str, Any]]:
        return [o.action for o in self.sim.ops(GW) if o.op == op]

    async def wait_ops(self, op: str, count: int) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self.wait_for(
            lambda: self.ops(op) if len(self.ops(op)) >= count else None, f"{count} {op} op(s)"
        )
        return result


@pytest.fixture
async def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RelayWorld]:
    for name in list(os.environ):
        if name.startswith("CHATGATE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CHATGATE_TEST_RELAY_SECRET", SECRET)
    sim = RelaySimulator(tmp_path / "relay.db", {GW: [SECRET]}, [{"platform": "discord"}], ack_timeout=2.0)
    await sim.start()
    world = RelayWorld(tmp_path, sim)
    try:
        yield world
    finally:
        await world.stop()
        await sim.stop()


def relay_hub(gateway: Gateway) -> RelayHub:
    """The one relay connection behind a gateway's fronted-platform adapters."""
    hubs = {a.hub for a in gateway.adapters.values() if isinstance(a, RelayPlatform)}
    assert len(hubs) == 1, f"expected one relay hub, found {len(hubs)}"
    return hubs.pop()
