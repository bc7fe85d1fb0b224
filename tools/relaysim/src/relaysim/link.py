"""One authenticated gateway connection: its reader, its answers, and the delivery of its buffer.

Deliveries of a gateway's buffer reach the socket through one cursor per
connection, under one lock, so they leave in buffer order. After the first
descriptor the connection replays every pending entry, ack-gated (one entry,
then its ``inbound_ack``, then the next); only then does it go live and send new
entries as they are appended. If an ack does not arrive within ``ack_timeout``
the replay logs it and goes on with the next entry; the unacknowledged entry
stays in the buffer and is replayed first on the next connection.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.websockets import WebSocket

from chatgate.domain.tasks import cancel_and_wait
from relaysim import ops
from relaysim.buffer import AckOutcome, BufferUnavailable, DurableBuffer, Entry
from relaysim.frames import BadLine, LineDecoder, encode, parse_buffer_id
from relaysim.state import Delivery, GatewayState, Hello, Interrupt, ReceivedOp

log = logging.getLogger(__name__)


class LinkClosed(Exception):
    """The connection can no longer be written to."""


class FrameError(Exception):
    """A frame that is well-formed JSON but breaks the contract; logged and skipped."""


@dataclass(frozen=True)
class LinkContext:
    buffer: DurableBuffer
    descriptors: dict[str, dict[str, Any]]
    ack_timeout: float
    notify: Callable[[], None]
    media_missing: Callable[[str], bool] = lambda url: False
    """Whether a ``send_media`` ``source_url`` names a re-host of this connector that is gone."""


class Link:
    def __init__(self, ws: WebSocket, number: int, state: GatewayState, ctx: LinkContext) -> None:
        self.ws = ws
        self.number = number
        self.state = state
        self.ctx = ctx
        self.platforms: dict[str, str | None] = {}  # answered hellos: platform -> botId
        self.live = False  # replay finished: new entries are sent as they are appended
        self.idle = False  # going_idle received on this connection: buffered-only
        self.finished = asyncio.Event()
        self._decoder = LineDecoder()
        self._write_lock = asyncio.Lock()
        self._deliver_lock = asyncio.Lock()
        self._last_sent = 0
        self._replay: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._stop = asyncio.Event()
        self._close: tuple[int, str] | None = None
        self._closing = False
        self._dropped = False
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {
            "hello": self._on_hello,
            "outbound": self._on_outbound,
            "interrupt": self._on_interrupt,
            "going_idle": self._on_going_idle,
            "inbound_ack": self._on_inbound_ack,
        }

    @property
    def gateway_id(self) -> str:
        return self.state.gateway_id

    @property
    def handshaken(self) -> bool:
        return bool(self.platforms)

    # -- lifetime ---------------------------------------------------------------------------------

    async def serve(self) -> None:
        """Run until the gateway disconnects or a close is requested; then stop every task of the link."""
        reader = asyncio.create_task(self._read(), name=f"relaysim-read-{self.gateway_id}-{self.number}")
        stopper = asyncio.create_task(self._stop.wait(), name=f"relaysim-stop-{self.gateway_id}")
        try:
            await asyncio.wait({reader, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if reader.done() and not reader.cancelled() and reader.exception() is not None:
                log.error("relay reader failed", exc_info=reader.exception(), extra=self._extra())
                self.request_close(1011, "internal error")
        finally:
            self._closing = True
            self.live = False
            await cancel_and_wait([reader, stopper, *self._tasks, *([self._replay] if self._replay else [])])
            if self._close is not None:
                await self._send_close(*self._close)
            self.finished.set()

    def request_close(self, code: int, reason: str) -> None:
        """Close with a close frame (e.g. 4401 on revocation); the serving task does the work."""
        if self._close is None and not self._dropped:
            self._close = (code, reason)
        self._closing = True
        self._stop.set()

    def request_drop(self) -> None:
        """End the connection without a close frame, like a network failure."""
        log.info(
            "dropping the connection without a close frame (simulated network failure)", extra=self._extra()
        )
        self._dropped = True
        self._close = None
        self._closing = True
        self._stop.set()

    async def _send_close(self, code: int, reason: str) -> None:
        async with self._write_lock:
            try:
                await self.ws.close(code=code, reason=reason)
            except Exception as exc:  # already gone: nothing left to tell it
                log.debug("relay close %d not sent: %s", code, exc, extra=self._extra())

    # -- writing ----------------------------------------------------------------------------------

    async def send(self, frame: dict[str, Any]) -> None:
        async with self._write_lock:
            if self._closing:
                raise LinkClosed("the connection is closing")
            try:
                await self.ws.send_text(encode(frame))
            except Exception as exc:
                self._closing = True
                raise LinkClosed(str(exc) or type(exc).__name__) from exc

    async def flush(self) -> None:
        """Send every pending entry above the cursor, in order, if this connection is live."""
        if not self.live or self.idle:
            return
        async with self._deliver_lock:
            while self.live and not self.idle:
                entry = self.ctx.buffer.next_after(self.gateway_id, self._last_sent)
                if entry is None:
                    return
                await self._deliver(entry, replay=False)
                self._last_sent = entry.buffer_id

    async def send_text(self, text: str) -> None:
        """Raw text as one WebSocket message (for malformed-frame tests)."""
        async with self._write_lock:
            if self._closing:
                raise LinkClosed("the connection is closing")
            await self.ws.send_text(text)

    async def send_interrupt(self, session_key: str, chat_id: str) -> None:
        await self.send({"type": "interrupt_inbound", "session_key": session_key, "chat_id": chat_id})

    async def _deliver(self, entry: Entry, *, replay: bool) -> None:
        await self.send(entry.wire())
        self.state.deliveries.append(Delivery(str(entry.buffer_id), self.number, replay, time.time()))
        self.ctx.notify()

    async def _run_replay(self) -> None:
        cursor = 0
        while True:
            async with self._deliver_lock:
                if self.idle:
                    log.info("replay stopped: the gateway went idle", extra=self._extra())
                    return
                entry = self.ctx.buffer.next_after(self.gateway_id, cursor)
                if entry is None:
                    self._last_sent = cursor
                    self.live = True
                    break
                await self._deliver(entry, replay=True)
            cursor = entry.buffer_id
            if not await self.ctx.buffer.wait_gone(entry.buffer_id, self.ctx.ack_timeout):
                log.warning(
                    "no inbound_ack within %.1fs; replay goes on, and the entry is replayed next connection",
                    self.ctx.ack_timeout,
                    extra={**self._extra(), "buffer_id": entry.buffer_id},
                )
        self.state.idle = False
        self.ctx.notify()
        await self.flush()

    async def _replay_guarded(self) -> None:
        try:
            await self._run_replay()
        except LinkClosed:
            log.info("connection closed during replay; the rest is replayed next time", extra=self._extra())

    # -- reading ----------------------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            while True:
                message = await self.ws.receive()
                if message["type"] == "websocket.disconnect":
                    log.info("gateway disconnected (code %s)", message.get("code"), extra=self._extra())
                    return
                text = message.get("text")
                if text is None:
                    self._bad("binary message ignored: frames are text messages", "")
                    continue
                counters = self.state.counters
                counters.messages_in += 1
                acks = 0
                for item in self._decoder.feed(text):
                    if isinstance(item, BadLine):
                        self._bad(item.reason, item.excerpt)
                    else:
                        acks += item["type"] == "inbound_ack"
                        await self._dispatch(item)
                counters.acks_in += acks
                counters.ack_messages += acks > 0
        except LinkClosed:
            return

    async def _dispatch(self, frame: dict[str, Any]) -> None:
        handler = self._handlers.get(frame["type"])
        if handler is None:
            self._bad(f"unknown frame type {frame['type']!r}", "")
            return
        try:
            await handler(frame)
        except FrameError as exc:
            self._bad(f"{frame['type']}: {exc}", "")
        except (LinkClosed, asyncio.CancelledError):
            raise
        except Exception:
            log.exception("relay frame %r failed; the connection goes on", frame["type"], extra=self._extra())

    def _bad(self, reason: str, excerpt: str) -> None:
        self.state.counters.bad_frames += 1
        log.warning("relay frame skipped: %s", reason, extra={**self._extra(), "excerpt": excerpt})
        self.ctx.notify()

    def _extra(self) -> dict[str, Any]:
        return {"gateway_id": self.gateway_id, "connection": self.number}

    # -- gateway frames ---------------------------------------------------------------------------

    async def _on_hello(self, frame: dict[str, Any]) -> None:
        platform, bot_id = frame.get("platform"), frame.get("botId")
        if not isinstance(platform, str) or not platform:
            raise FrameError("platform must be a non-empty string")
        if bot_id is not None and not isinstance(bot_id, str):
            raise FrameError("botId must be a string")
        manifest = frame.get("command_manifest")
        if manifest is not None and not isinstance(manifest, list):
            raise FrameError("command_manifest must be a list")
        descriptor = self.ctx.descriptors.get(platform)
        self.state.hellos.append(Hello(platform, bot_id, manifest, self.number, descriptor is not None))
        if descriptor is None:
            log.warning(
                "hello for %r, which this relay does not front (it fronts %s); no descriptor sent",
                platform,
                ", ".join(sorted(self.ctx.descriptors)),
                extra=self._extra(),
            )
            self.ctx.notify()
            return
        await self.send({"type": "descriptor", "descriptor": descriptor})
        self.platforms[platform] = bot_id
        if bot_id is not None:
            self.state.bots[platform] = bot_id
        if self._replay is None:
            self._replay = asyncio.create_task(
                self._replay_guarded(), name=f"relaysim-replay-{self.gateway_id}-{self.number}"
            )
        self.ctx.notify()

    async def _on_outbound(self, frame: dict[str, Any]) -> None:
        request_id = frame.get("requestId")
        if not isinstance(request_id, str) or not request_id:
            raise FrameError("requestId must be a non-empty string; no result can be addressed")
        action = frame.get("action")
        platform, bot_id = frame.get("platform"), frame.get("botId")
        op = action.get("op") if isinstance(action, dict) else None
        record = ReceivedOp(
            self.gateway_id,
            request_id,
            op if isinstance(op, str) else None,
            action if isinstance(action, dict) else {"invalid": action},
            platform if isinstance(platform, str) else None,
            bot_id if isinstance(bot_id, str) else None,
            self.number,
            time.time(),
        )
        self.state.ops.append(record)
        policy = self.state.policy
        self.ctx.notify()
        if policy.mode == "never":
            return
        result = self._result_for(record, action)
        if result.get("success") and policy.mode == "fail":
            result = ops.failure("simulated failure")
        elif result.get("success"):
            result = ops.apply(record.action, str(record.platform), self.state.messages)
        if policy.delay > 0:
            task = asyncio.create_task(self._result_later(record, result, policy.delay))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            await self._send_result(record, result)

    def _result_for(self, record: ReceivedOp, action: Any) -> dict[str, Any]:
        """Check the action; on success fill in the platform it was resolved to."""
        if not isinstance(action, dict):
            return ops.failure("action must be an object")
        platform = record.platform
        if platform is None:
            fronted = list(self.platforms) or list(self.ctx.descriptors)
            if len(fronted) != 1:
                return ops.failure("outbound without a platform on a connection that fronts several")
            platform = record.platform = fronted[0]
        descriptor = self.ctx.descriptors.get(platform)
        if descriptor is None:
            return ops.failure(f"platform {platform!r} is not fronted by this relay")
        error = ops.check(action, descriptor)
        if error is None and action["op"] == "send_media" and self.ctx.media_missing(action["source_url"]):
            error = "send_media: source_url names no live re-host of this connector (expired or never made)"
        return ops.failure(error) if error else {"success": True}

    async def _result_later(self, record: ReceivedOp, result: dict[str, Any], delay: float) -> None:
        await asyncio.sleep(delay)
        try:
            await self._send_result(record, result)
        except LinkClosed:
            log.info("result for %s not sent: connection closed", record.request_id, extra=self._extra())

    async def _send_result(self, record: ReceivedOp, result: dict[str, Any]) -> None:
        await self.send({"type": "outbound_result", "requestId": record.request_id, "result": result})
        record.result = result
        self.ctx.notify()

    async def _on_interrupt(self, frame: dict[str, Any]) -> None:
        key, reason = frame.get("session_key"), frame.get("reason")
        if not isinstance(key, str) or not key:
            raise FrameError("session_key must be a non-empty string")
        reason = reason if isinstance(reason, str) else None
        self.state.interrupts.append(Interrupt(key, reason, self.number, time.time()))
        self.state.counters.interrupts += 1
        self.ctx.notify()

    async def _on_going_idle(self, frame: dict[str, Any]) -> None:
        self.idle = True
        self.live = False
        self.state.idle = True
        self.state.counters.going_idle += 1
        self.ctx.notify()
        # Taking the delivery lock waits out a delivery in flight: nothing follows the ack.
        async with self._deliver_lock:
            await self.send({"type": "going_idle_ack"})

    async def _on_inbound_ack(self, frame: dict[str, Any]) -> None:
        buffer_id = parse_buffer_id(frame.get("bufferId"))
        if buffer_id is None:
            raise FrameError(f"bufferId {frame.get('bufferId')!r} is not one this relay issues")
        if self.state.lose_acks:
            self.state.lost_acks.append(str(buffer_id))
            self.ctx.notify()
            return
        try:
            outcome = await self.ctx.buffer.ack(self.gateway_id, buffer_id)
        except BufferUnavailable as exc:
            log.error("ack not recorded, the entry will be replayed: %s", exc, extra=self._extra())
            return
        if outcome is AckOutcome.FOREIGN:
            raise FrameError(f"bufferId {buffer_id} belongs to another gateway; ignored")
        if outcome is AckOutcome.UNKNOWN:
            log.info(
                "ack for bufferId %d, which is not pending (acked twice?)", buffer_id, extra=self._extra()
            )
        self.ctx.notify()
