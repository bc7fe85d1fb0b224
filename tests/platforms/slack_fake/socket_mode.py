"""Slack's Socket Mode server side, as the fake runs it: envelopes out, acks in, redelivery.

Slack sends each event as an envelope (``envelope_id``, ``type``, ``payload``,
``retry_attempt``, ``retry_reason``) over the WebSocket that ``apps.connections.open``
named, and expects ``{"envelope_id": ...}`` back. An envelope not acknowledged within
``redeliver_after`` seconds, or still unacknowledged when a new connection says hello,
is sent again with ``retry_attempt`` one higher (``retry_reason`` "timeout" or
"reconnect"), like Slack. Each ack's latency from the envelope's first send is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web


@dataclass
class Envelope:
    envelope_id: str
    kind: str  # events_api | interactive | slash_commands
    payload: dict[str, Any]
    first_sent: float = 0.0
    last_sent: float = 0.0
    attempts: int = 0
    acked_at: float | None = None
    ack_payload: dict[str, Any] | None = None

    def frame(self, reason: str) -> str:
        return json.dumps(
            {
                "envelope_id": self.envelope_id,
                "type": self.kind,
                "accepts_response_payload": self.kind != "events_api",
                "retry_attempt": self.attempts,
                "retry_reason": reason if self.attempts else "",
                "payload": self.payload,
            }
        )


@dataclass
class SocketModeServer:
    redeliver_after: float = 3.0
    envelopes: dict[str, Envelope] = field(default_factory=dict)
    connections: list[web.WebSocketResponse] = field(default_factory=list)
    connects: int = 0
    acks: list[tuple[str, float]] = field(default_factory=list)
    """(envelope id, seconds from first send to ack), in ack order (a repeated ack too)."""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _redeliverer: asyncio.Task[None] | None = None
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    drop_acks: bool = False
    """While set, acks are lost on the way (as when the process dies right after sending them)."""
    dropped_acks: int = 0
    on_ack: Callable[[Envelope], None] | None = None
    """Called at each first ack, before it is recorded (a test checks what is committed then)."""

    def start(self) -> None:
        self._redeliverer = asyncio.create_task(self._redeliver_loop())

    async def stop(self) -> None:
        if self._redeliverer is not None:
            self._redeliverer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._redeliverer
        for ws in list(self.connections):
            await ws.close()

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.connections.append(ws)
        self.connects += 1
        await ws.send_str(json.dumps({"type": "hello", "num_connections": len(self.connections)}))
        self.connected.set()
        for envelope in list(self.envelopes.values()):
            if envelope.acked_at is None:
                await self._send(envelope, "reconnect", ws)
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self._on_text(message.data)
        finally:
            self.connections.remove(ws)
            if not self.connections:
                self.connected.clear()
        return ws

    def _on_text(self, data: str) -> None:
        try:
            body = json.loads(data)
        except ValueError:
            return
        envelope = self.envelopes.get(str(body.get("envelope_id")))
        if envelope is None:
            return
        if self.drop_acks:
            self.dropped_acks += 1
            return
        self.acks.append((envelope.envelope_id, time.monotonic() - envelope.first_sent))
        if envelope.acked_at is None:
            if self.on_ack is not None:
                self.on_ack(envelope)
            envelope.acked_at = time.monotonic()
            envelope.ack_payload = body.get("payload")

    async def _send(self, envelope: Envelope, reason: str, ws: web.WebSocketResponse | None = None) -> None:
        target = ws or (self.connections[-1] if self.connections else None)
        if target is None:
            return  # sent at the next hello
        now = time.monotonic()
        if envelope.first_sent:
            envelope.attempts += 1
        else:
            envelope.first_sent = now
        envelope.last_sent = now
        if target is not None:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await target.send_str(envelope.frame(reason))

    async def push(self, kind: str, payload: dict[str, Any]) -> Envelope:
        envelope = Envelope(f"env-{next(self._ids)}", kind, payload)
        self.envelopes[envelope.envelope_id] = envelope
        await self._send(envelope, "")
        return envelope

    async def _redeliver_loop(self) -> None:
        while True:
            await asyncio.sleep(0.05)
            now = time.monotonic()
            for envelope in list(self.envelopes.values()):
                due = envelope.acked_at is None and now - envelope.last_sent >= self.redeliver_after
                if due and self.connections:
                    await self._send(envelope, "timeout")

    async def drop_connections(self) -> None:
        """Close every socket from the server side (Slack's refresh); the client reconnects."""
        for ws in list(self.connections):
            await ws.close()

    def unacked(self) -> list[Envelope]:
        return [e for e in self.envelopes.values() if e.acked_at is None]
