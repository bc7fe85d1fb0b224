"""Helpers for the web chat tests: a real in-process Gateway and real WebSocket clients.

Every gateway listens on 127.0.0.1 with port 0 and keeps its SQLite file in the
test's ``tmp_path``; clients speak the /ws protocol through the ``websockets``
library. Absence of a frame is proven by ordering (``WebClient.sync``), never by
sleeping.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from chatgate.app.config import GatewayConfig
from chatgate.app.gateway import Gateway
from chatgate.platforms.kit.conform import conform
from chatgate.store.base import Store

# Generous: a noisy 2-core CI machine may stall for seconds; nothing here waits this long when healthy.
FRAME_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0

StartGateway = Callable[..., Awaitable[Gateway]]


def web_config(**overrides: Any) -> GatewayConfig:
    """A loopback gateway on an ephemeral port with a fast echo agent, plus ``overrides``."""
    values: dict[str, Any] = {"http": {"port": 0}, "agent": {"echo": {"chunk_delay_ms": 5}}}
    values.update(overrides)
    return conform(GatewayConfig, values)


@pytest.fixture(autouse=True)
def _no_chatgate_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's CHATGATE_* variables must not change what these tests build."""
    for name in list(os.environ):
        if name.startswith("CHATGATE_"):
            monkeypatch.delenv(name)


@pytest.fixture
async def start_gateway(tmp_path: Path) -> AsyncIterator[StartGateway]:
    """Start real gateways (stopped at teardown): ``await start_gateway(config=None, store=None)``."""
    started: list[Gateway] = []

    async def start(config: GatewayConfig | None = None, *, store: Store | None = None) -> Gateway:
        state_dir = tmp_path / f"state{len(started)}"
        gateway = Gateway(config or web_config(), state_dir, store=store)
        await gateway.start()
        started.append(gateway)
        assert gateway.port, "the gateway did not report the port it bound"
        return gateway

    yield start
    hung: list[Gateway] = []
    for gateway in reversed(started):
        try:
            await asyncio.wait_for(gateway.stop(), STOP_TIMEOUT)
        except TimeoutError:
            hung.append(gateway)
            # The timeout cancelled the stuck stop() (and the delivery task a second time): finish it.
            await asyncio.wait_for(gateway.stop(), STOP_TIMEOUT)
    if hung:
        pytest.fail(
            f"gateway.stop() did not return within {STOP_TIMEOUT:.0f}s (a task that swallowed its"
            " cancellation? see test_webchat_shutdown.py)"
        )


class WebClient:
    """One browser-like WebSocket client of /ws."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._probes = 0

    @classmethod
    async def connect(cls, port: int) -> WebClient:
        ws = await websockets.connect(f"ws://127.0.0.1:{port}/ws", open_timeout=FRAME_TIMEOUT)
        return cls(ws)

    async def close(self) -> None:
        await self.ws.close()

    async def send(self, frame: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(frame))

    async def send_raw(self, data: str | bytes) -> None:
        await self.ws.send(data)

    async def recv(self) -> dict[str, Any]:
        raw = await asyncio.wait_for(self.ws.recv(), FRAME_TIMEOUT)
        frame = json.loads(raw)
        assert isinstance(frame, dict), f"server sent a non-object frame: {raw!r}"
        return frame

    async def until(self, done: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """Every frame received up to and including the first one for which ``done`` is true."""
        frames: list[dict[str, Any]] = []
        while True:
            frame = await self.recv()
            frames.append(frame)
            if done(frame):
                return frames

    async def hello(self, chat_id: str, user_id: str = "u1", **extra: Any) -> None:
        await self.send({"type": "hello", "chat_id": chat_id, "user_id": user_id, **extra})
        frame = await self.recv()
        assert frame == {"type": "ready"}, f"expected ready after hello, got {frame}"

    async def message(self, msg_id: str, text: str) -> None:
        await self.send({"type": "message", "id": msg_id, "text": text})

    async def until_final(self, in_reply_to: str) -> list[dict[str, Any]]:
        return await self.until(lambda f: f.get("type") == "final" and f.get("in_reply_to") == in_reply_to)

    async def ask(self, msg_id: str, text: str) -> list[dict[str, Any]]:
        """Send a message and return every frame up to and including its final."""
        await self.message(msg_id, text)
        return await self.until_final(msg_id)

    async def sync(self) -> list[dict[str, Any]]:
        """A barrier: every frame the server queued before it read this probe, then the probe's error.

        The server reads one socket's frames in order and answers an unknown frame type
        synchronously, so anything it would have sent in reply to earlier frames (acks,
        backlog after ``ready``, errors) is in the returned list.
        """
        self._probes += 1
        probe = f"sync-probe-{self._probes}"
        await self.send({"type": "sync-probe", "id": probe})
        frames = await self.until(lambda f: f.get("type") == "error" and f.get("id") == probe)
        assert frames[-1]["code"] == "unknown_type"
        return frames[:-1]


@pytest.fixture
async def connect_client() -> AsyncIterator[Callable[[int], Awaitable[WebClient]]]:
    """Open real WebSocket clients to a gateway port; all closed at teardown."""
    clients: list[WebClient] = []

    async def connect(port: int) -> WebClient:
        client = await WebClient.connect(port)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        await client.close()


def of_type(frames: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [f for f in frames if f.get("type") == kind]


class InboxInsertSwitch:
    """A real sqlite3 connection factory whose connections refuse INSERT INTO inbox while ``blocked``.

    This is the storage seam: SQLite itself rejects the statement ("not authorized"), exactly
    as it would a real write failure, and the store must report it upward.
    """

    def __init__(self) -> None:
        self._blocked = threading.Event()
        self.denied = 0

    def block(self) -> None:
        self._blocked.set()

    def unblock(self) -> None:
        self._blocked.clear()

    def connect(self, path: str) -> sqlite3.Connection:
        # cached_statements=0: the authorizer runs when a statement is prepared, so a statement
        # cached while the switch was open must not slip through once it is closed.
        conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=30.0, cached_statements=0
        )
        conn.set_authorizer(self._authorize)
        return conn

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, trig: str | None
    ) -> int:
        if action == sqlite3.SQLITE_INSERT and arg1 == "inbox" and self._blocked.is_set():
            self.denied += 1
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK
