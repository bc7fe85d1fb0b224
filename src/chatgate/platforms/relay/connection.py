"""The gateway's WebSocket to the relay connector: dial, handshake, read, request, reconnect.

One supervisor task owns the socket. It dials with a freshly minted upgrade
token, sends one ``hello`` per fronted platform, and reads until the socket
closes; then it re-dials with capped exponential backoff and full jitter. A
close with code 4401 after this gateway has ever completed a handshake means
the connector revoked its secret: the supervisor stops for good and the relay
reports itself disabled. A 4401 before any handshake (a not-yet-provisioned
race) and a 4401 whose reason is ``expired`` are retried like any other close.

Frames are typed (``frames.py``): each line is validated into its model as it is
read (``wire.parse_frame``); a line that is not a frame is handed up as a
``BadFrame`` and the reader goes on with the next.

Requests (``outbound`` frames) wait for the ``outbound_result`` with the same
``requestId``. The outcome is one of three: ``OpResult`` (the connector
answered), ``Unsent`` (the frame never left: safe to retry), or ``NoResult``
(it left and no answer came: the connector may have acted — ambiguous).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from chatgate.domain.tasks import cancel_and_wait
from chatgate.platforms.relay.auth import make_upgrade_token
from chatgate.platforms.relay.frames import (
    Action,
    Descriptor,
    DescriptorFrame,
    GoingIdleAckFrame,
    GoingIdleFrame,
    HelloFrame,
    Incoming,
    OutboundFrame,
    OutboundResultFrame,
    Outgoing,
)
from chatgate.platforms.relay.handler import FrameHandler
from chatgate.platforms.relay.wire import MAX_FRAME_BYTES, BadFrame, FrameSplitter, encode, parse_frame

log = logging.getLogger(__name__)

UNAUTHORIZED = 4401
EXPIRED_REASON = "expired"


class RelaySettings(msgspec.Struct, frozen=True):
    url: str
    gateway_id: str
    secret: str
    identities: tuple[tuple[str, str], ...]
    """(platform, bot id) pairs this gateway fronts: one ``hello`` each."""
    outbound_timeout: float = 20.0
    handshake_timeout: float = 15.0
    reconnect_initial: float = 1.0
    reconnect_max: float = 30.0
    going_idle_timeout: float = 5.0
    token_ttl: int = 300
    command_manifest: tuple[dict[str, Any], ...] = ()
    allow_private_urls: bool = False
    """Fetch a ``media_urls`` URL on a private or loopback address (``media.py``)."""


class OpResult(msgspec.Struct, frozen=True):
    success: bool
    message_id: str | None = None
    error: str | None = None
    retry_after: float | None = None


class Unsent(msgspec.Struct, frozen=True):
    reason: str


class NoResult(msgspec.Struct, frozen=True):
    reason: str


Outcome = OpResult | Unsent | NoResult


def dial_url(url: str) -> str:
    """The configured connector base URL as the ``ws(s)://…/relay`` dial target."""
    raw = url.strip().rstrip("/")
    if raw.startswith("https://"):
        raw = "wss://" + raw.removeprefix("https://")
    elif raw.startswith("http://"):
        raw = "ws://" + raw.removeprefix("http://")
    return raw if raw.endswith("/relay") else raw + "/relay"


@dataclass
class _Pending:
    future: asyncio.Future[OpResult | NoResult]
    sent: bool = False


@dataclass
class ConnectionState:
    connected: bool = False
    """A socket is open and every fronted platform's descriptor arrived."""
    revoked: bool = False
    ever_handshaken: bool = False
    detail: str = "not started"
    connects: int = 0
    last_close: str | None = None
    descriptors: dict[str, Descriptor] = field(default_factory=dict)


class RelayConnection:
    def __init__(
        self,
        settings: RelaySettings,
        handler: FrameHandler,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.settings = settings
        self.url = dial_url(settings.url)
        self._handler = handler
        self._sleep = sleep
        self.state = ConnectionState()
        self._ws: ClientConnection | None = None
        self._send_lock = asyncio.Lock()
        self._pending: dict[str, _Pending] = {}
        self._idle_ack: asyncio.Future[None] | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._closing = False
        self._handshaken = asyncio.Event()

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._supervisor is None:
            self._supervisor = asyncio.create_task(self._supervise(), name="relay-connection")

    async def wait_connected(self, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._handshaken.wait()
        return self.state.connected

    async def go_idle(self, timeout: float) -> bool:
        """Ask the connector to buffer for us and read until it says it does (after the handshake)."""
        if self._idle_ack is not None or (self._ws is None and not self.state.connected):
            return False
        self._idle_ack = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(timeout):
                if not await self.wait_connected(timeout):
                    return False
                await self._send(GoingIdleFrame())
                await asyncio.shield(self._idle_ack)
            return True
        except (TimeoutError, ConnectionClosed, OSError, RuntimeError) as exc:
            log.warning("relay: no going_idle_ack (%s); closing anyway", exc or "timed out")
            return False
        finally:
            self._idle_ack = None

    async def close(self, drain_timeout: float) -> None:
        """Wait (bounded) for in-flight requests, then close; whatever is still open ends ambiguous."""
        self._closing = True
        waiting = [p.future for p in self._pending.values() if not p.future.done()]
        if waiting and drain_timeout > 0:
            await asyncio.wait(waiting, timeout=drain_timeout)
        ws = self._ws
        if ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), 1.0)
        if self._supervisor is not None:
            await cancel_and_wait([self._supervisor])
        self._supervisor = None
        self._fail_pending("the relay connection closed before the connector answered")
        self._set(False, "stopped")

    # ------------------------------------------------------------ requests

    async def request(self, action: Action, platform: str | None = None) -> Outcome:
        if self._closing and self._ws is None:
            return Unsent("the relay connection is closed")
        if not self.state.connected or self._ws is None:
            return Unsent(f"relay not connected ({self.state.detail})")
        request_id = uuid.uuid4().hex
        bot = dict(self.settings.identities).get(platform) if platform is not None else None
        frame = OutboundFrame(requestId=request_id, action=action, platform=platform, botId=bot or None)
        pending = _Pending(asyncio.get_running_loop().create_future())
        self._pending[request_id] = pending
        try:
            try:
                await self._send(frame)
            except (ConnectionClosed, OSError, RuntimeError) as exc:
                return Unsent(f"relay send failed: {exc}")
            pending.sent = True
            async with asyncio.timeout(self.settings.outbound_timeout):
                return await asyncio.shield(pending.future)
        except TimeoutError:
            return NoResult(f"no outbound_result within {self.settings.outbound_timeout:g}s")
        finally:
            self._pending.pop(request_id, None)

    async def send_frame(self, frame: Outgoing) -> bool:
        """A fire-and-forget frame (ack, interrupt); ``False`` when it could not be written."""
        try:
            await self._send(frame)
        except (ConnectionClosed, OSError, RuntimeError, ValueError) as exc:  # ValueError: not encodable
            log.info("relay: could not send %s: %s", frame.type, exc)
            return False
        return True

    async def send_text(self, text: str) -> bool:
        """Already encoded frames (newline-terminated lines) as one message; ``False`` when not written."""
        try:
            await self._send_text(text)
        except (ConnectionClosed, OSError, RuntimeError) as exc:
            log.info("relay: could not send %d frame(s): %s", text.count("\n"), exc)
            return False
        return True

    async def _send(self, frame: Outgoing) -> None:
        await self._send_text(encode(frame))

    async def _send_text(self, text: str) -> None:
        ws = self._ws
        if ws is None:
            raise RuntimeError("relay not connected")
        async with self._send_lock:
            await ws.send(text)

    def _fail_pending(self, reason: str) -> None:
        for pending in list(self._pending.values()):
            if not pending.future.done():
                pending.future.set_result(NoResult(reason))

    # ------------------------------------------------------------ supervisor

    def _set(self, connected: bool, detail: str) -> None:
        self.state.connected = connected
        self.state.detail = detail
        self._handler.on_state()

    def _headers(self) -> dict[str, str]:
        token = make_upgrade_token(self.settings.gateway_id, self.settings.secret, self.settings.token_ttl)
        return {"Authorization": f"Bearer {token}"}

    async def _supervise(self) -> None:
        delay = self.settings.reconnect_initial
        while not self._closing:
            self._set(False, "connecting" if self.state.connects == 0 else "reconnecting")
            try:
                code, reason, handshaken = await self._connect_once()
            except Exception as exc:  # a bug must not end the relay for good: log it and dial again
                log.exception("relay: the connection failed unexpectedly")
                self.state.last_close = f"failed: {exc!r}"[:200]
                code, reason, handshaken = None, "", False
            if self._closing:
                return
            if code == UNAUTHORIZED and reason != EXPIRED_REASON and self.state.ever_handshaken:
                self.state.revoked = True
                self._set(False, "disabled: the connector revoked this gateway's relay secret (close 4401)")
                log.error(
                    "relay: the connector closed with 4401 after a successful handshake; the relay secret"
                    " was revoked. Not reconnecting: enroll the gateway again and restart it."
                )
                return
            if handshaken:
                delay = self.settings.reconnect_initial
            wait = random.uniform(0, delay)  # full jitter: a fleet does not reconnect in lockstep
            self._set(False, f"disconnected ({self.state.last_close}); retrying in {wait:.1f}s")
            await self._sleep(wait)
            delay = min(delay * 2, self.settings.reconnect_max)

    async def _connect_once(self) -> tuple[int | None, str, bool]:
        """One connection's life; returns its close code, reason and whether it handshook."""
        handshaken = False
        try:
            async with connect(
                self.url,
                additional_headers=self._headers(),
                open_timeout=self.settings.handshake_timeout,
                max_size=MAX_FRAME_BYTES * 4,
                ping_interval=20,
                ping_timeout=60,
                close_timeout=2,
                proxy=None,
            ) as ws:
                self._ws = ws
                self.state.connects += 1
                self.state.descriptors = {}
                reader = asyncio.create_task(self._read(ws), name="relay-reader")
                try:
                    for platform, bot_id in self.settings.identities:
                        manifest = self.settings.command_manifest if platform == "discord" else ()
                        await self._send(
                            HelloFrame(platform=platform, botId=bot_id, command_manifest=manifest or None)
                        )
                    await reader
                finally:
                    handshaken = self.state.connected or bool(self.state.descriptors)
                    await cancel_and_wait([reader])
                    self._ws = None
                    self._handshaken.clear()
                    self._fail_pending("the relay connection was lost before the connector answered")
            code, reason = ws.close_code, ws.close_reason or ""
        except ConnectionClosed as exc:
            received = exc.rcvd
            code, reason = (received.code, received.reason) if received else (None, "")
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            self.state.last_close = f"cannot connect to {self.url}: {exc}"
            log.warning("relay: %s", self.state.last_close)
            return None, "", False
        self.state.last_close = f"closed {code} {reason}".strip()
        if not self._closing:
            log.warning("relay: connection %s", self.state.last_close)
        return code, reason, handshaken

    async def _read(self, ws: ClientConnection) -> None:
        splitter = FrameSplitter()
        with contextlib.suppress(ConnectionClosed):
            async for message in ws:
                received_at = time.time()
                for line in splitter.feed(message):
                    if self._handler.is_full():
                        await self._handler.wait_room()  # the socket is not read meanwhile
                    if isinstance(line, BadFrame):
                        self._handler.on_bad_frame(line)
                    else:
                        self._dispatch(line, received_at)

    def _dispatch(self, line: str, received_at: float) -> None:
        """One line; whatever it holds, the reader goes on with the next."""
        try:
            frame = parse_frame(line)
        except Exception as exc:  # a bug, not bad input (parse_frame never raises on input)
            log.exception("relay: parsing a frame failed")
            frame = BadFrame(f"could not parse the frame: {exc!r}"[:200], line[:80])
        if isinstance(frame, BadFrame):
            self._handler.on_bad_frame(frame)
            return
        try:
            self._dispatch_one(frame, line, received_at)
        except Exception as exc:
            log.exception("relay: handling a %s frame failed", frame.type)
            self._handler.on_bad_frame(BadFrame(f"could not handle the frame: {exc!r}"[:200], line[:80]))

    def _dispatch_one(self, frame: Incoming, line: str, received_at: float) -> None:
        if isinstance(frame, DescriptorFrame):
            self._on_descriptor(frame.descriptor)
        elif isinstance(frame, OutboundResultFrame):
            self._on_result(frame)
        elif isinstance(frame, GoingIdleAckFrame):
            if self._idle_ack is not None and not self._idle_ack.done():
                self._idle_ack.set_result(None)
        else:
            self._handler.on_frame(frame, line, received_at)

    def _on_descriptor(self, descriptor: Descriptor) -> None:
        fronted = {p for p, _ in self.settings.identities}
        if descriptor.platform not in fronted:
            self._handler.on_bad_frame(BadFrame(f"descriptor for {descriptor.platform!r}, not fronted", ""))
            return
        self.state.descriptors[descriptor.platform] = descriptor
        self.state.ever_handshaken = True
        self._handler.on_descriptor(descriptor)
        if fronted <= set(self.state.descriptors):
            self._set(True, "connected")
            self._handshaken.set()

    def _on_result(self, frame: OutboundResultFrame) -> None:
        request_id = frame.requestId
        pending = self._pending.get(request_id) if request_id is not None else None
        if pending is None:
            # Usually a request its caller stopped waiting for (a typing indicator, a timeout).
            log.info("relay: outbound_result for %s, which no one waits for any more", str(request_id)[:80])
            return
        result = frame.result
        outcome = OpResult(
            success=result.success,
            message_id=result.message_id,
            error=result.error,
            retry_after=result.retry_after,
        )
        if not pending.future.done():
            pending.future.set_result(outcome)
