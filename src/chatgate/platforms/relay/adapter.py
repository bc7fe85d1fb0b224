"""The relay adapter: platforms fronted by a relay connector, over one WebSocket.

``RelayHub`` owns the connection and the intake; one ``RelayPlatform`` per
fronted platform is what the engine sees as that platform's adapter.

Frames arrive typed (``frames.py``). Intake is one task that takes ``inbound`` and
``passthrough_forward`` frames in arrival order, including those that failed
validation (a ``BadFrame`` that keeps their ``bufferId``). Each is admitted
(committed) before its ``inbound_ack`` is sent: a replay of an admitted delivery
is a duplicate that is acknowledged again and never run twice; a frame whose
intake is cancelled or fails before the commit is not acknowledged, so the
connector replays it. A frame that can never be admitted (malformed,
unsupported, refused) is recorded with its reason and acknowledged, so it is not
replayed forever. While the store is unavailable the
intake retries the same frame (later frames wait behind it: order is kept).

What the reader has read but the intake has not yet taken is bounded
(``MAX_QUEUED_FRAMES``): when it is full the reader stops reading the socket,
so a flood waits in the connector. Acks ready in the same loop tick share one
WebSocket message (``coalesce.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable

from chatgate.domain.commands import parse_command
from chatgate.domain.inbound import Inbound
from chatgate.domain.outbound import (
    Ambiguous,
    Deferred,
    Delivered,
    DeliveryResult,
    Rejected,
    RetryLater,
)
from chatgate.domain.tasks import cancel_and_wait
from chatgate.engine.ports import (
    WAIT_UNTIL_STOPPED,
    AdapterState,
    Intake,
    Refused,
    Unavailable,
    Undecodable,
)
from chatgate.platforms.discord_wire.interaction import UnsupportedInteraction, decode_interaction
from chatgate.platforms.kit.per_key import PerKeyQueues
from chatgate.platforms.relay.coalesce import FrameCoalescer
from chatgate.platforms.relay.connection import (
    NoResult,
    OpResult,
    Outcome,
    RelayConnection,
    RelaySettings,
    Unsent,
)
from chatgate.platforms.relay.frames import (
    INTAKE_TYPES,
    Action,
    Descriptor,
    HubFrame,
    InboundAckFrame,
    InboundFrame,
    IntakeFrame,
    InterruptFrame,
    InterruptInboundFrame,
)
from chatgate.platforms.relay.handler import FrameHandler
from chatgate.platforms.relay.platform import RelayPlatform
from chatgate.platforms.relay.text_lane import TRANSPORT, to_inbound
from chatgate.platforms.relay.wire import RECORD_EXCERPT_CHARS, BadFrame, encode

log = logging.getLogger(__name__)

MAX_QUEUED_FRAMES = 256
"""Intake frames read from the socket but not yet handed to their chat's lane (each is at most
one line of 1 MiB; ``PerKeyQueues`` bounds what waits behind the lanes)."""


class RelayHub(FrameHandler):
    def __init__(
        self,
        settings: RelaySettings,
        intake: Intake,
        *,
        interrupt: Callable[[str, str], Awaitable[object]],
        duplicate_marker: str = "",
        on_bad_frame: Callable[[str], None] = lambda reason: None,
        max_queued: int = MAX_QUEUED_FRAMES,
    ) -> None:
        self.settings = settings
        self._intake = intake
        self._interrupt_session = interrupt
        self._on_bad_frame = on_bad_frame
        self.duplicate_marker = duplicate_marker
        self.connection = RelayConnection(settings, self)
        self.platforms: dict[str, RelayPlatform] = {p: RelayPlatform(self, p) for p, _ in settings.identities}
        # Bounded: when it is full the reader stops reading the socket (``wait_room``) until the
        # intake has taken a frame, so a flood is held by the connector, never in this process.
        self._queue: asyncio.Queue[tuple[IntakeFrame | BadFrame, str, float]] = asyncio.Queue(max_queued)
        self._room = asyncio.Event()
        self.peak_queued = 0
        """The most frames the queue ever held (a test of the bound reads it)."""
        self._acks = FrameCoalescer(self.connection.send_text)
        self._intake_task: asyncio.Task[None] | None = None
        self._queues = PerKeyQueues(name="relay-intake")
        self._closed = False
        self._idle: asyncio.Task[bool] | None = None
        self._side_tasks: set[asyncio.Task[None]] = set()
        self.acked = 0
        self.admitted = 0

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Idempotent: every fronted platform's adapter starts the one connection."""
        if self._intake_task is not None:
            return
        self._intake_task = asyncio.create_task(self._run_intake(), name="relay-intake")
        self.connection.start()

    def stop_intake(self) -> None:
        """Shutdown began: ask the connector to buffer for us.

        Intake keeps admitting until ``close`` (after the outbox flush), so a frame that
        races the flip is committed, not lost; the next start runs it.
        """
        if self._idle is None:
            self._idle = asyncio.create_task(
                self.connection.go_idle(self.settings.going_idle_timeout), name="relay-going-idle"
            )

    async def close(self, budget: float) -> None:
        """After the outbox flush: finish going idle, let in-flight requests answer, close (all
        bounded). Idempotent: every fronted platform's adapter closes the one connection."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        if self._idle is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._idle), max(0.0, deadline - loop.time()))
        await cancel_and_wait(
            [t for t in (self._idle, self._intake_task, *self._side_tasks) if t is not None]
        )
        await self._queues.aclose()
        await self._acks.aclose()
        await self.connection.close(drain_timeout=max(0.0, min(5.0, deadline - loop.time() - 1.0)))

    def state(self, platform: str) -> AdapterState:
        conn = self.connection.state
        if conn.revoked:
            return AdapterState(False, conn.detail)
        if platform not in conn.descriptors or not conn.connected:
            return AdapterState(False, f"relay {self.connection.url}: {conn.detail}")
        return AdapterState(True, f"relay {self.connection.url}: connected")

    def descriptor(self, platform: str) -> Descriptor | None:
        return self.connection.state.descriptors.get(platform)

    # ------------------------------------------------------------ frames from the connection

    def on_descriptor(self, descriptor: Descriptor) -> None:
        log.info(
            "relay: %s fronted (%s, max %d %s, edit=%s, ops=%s)",
            descriptor.platform,
            descriptor.label or "no label",
            descriptor.max_message_length or 4096,
            descriptor.len_unit,
            descriptor.supports_edit,
            ",".join(descriptor.supported_ops or ["legacy"]),
        )

    def on_frame(self, frame: HubFrame, line: str, received_at: float) -> None:
        if isinstance(frame, InterruptInboundFrame):
            log.info("relay: interrupt for %s (chat %s)", frame.session_key, frame.chat_id)
            task = asyncio.create_task(self._interrupt(frame.session_key), name="relay-interrupt")
            self._side_tasks.add(task)
            task.add_done_callback(self._side_tasks.discard)
        else:
            self._enqueue((frame, line, received_at))

    async def _interrupt(self, session_key: str) -> None:
        try:
            await self._interrupt_session(session_key, "relay interrupt")
        except Exception:
            log.exception("relay: stopping %s failed", session_key)

    def on_bad_frame(self, bad: BadFrame) -> None:
        if bad.frame_type in INTAKE_TYPES:
            # A delivery that can never be admitted: recorded and acknowledged in its turn.
            self._enqueue((bad, bad.excerpt, 0.0))
            return
        log.warning("relay: ignored a frame: %s", bad.reason, extra={"excerpt": bad.excerpt})
        self._on_bad_frame(bad.reason)

    def on_state(self) -> None:
        return None

    def is_full(self) -> bool:
        return self._queue.full()

    async def wait_room(self) -> None:
        while self._queue.full():
            self._room.clear()
            await self._room.wait()

    def _enqueue(self, item: tuple[IntakeFrame | BadFrame, str, float]) -> None:
        # The reader is the only producer and waits for room before each line, so this fits.
        self._queue.put_nowait(item)
        self.peak_queued = max(self.peak_queued, self._queue.qsize())

    # ------------------------------------------------------------ intake

    async def _run_intake(self) -> None:
        """Decode in arrival order; admit different chats concurrently (their commits share a
        group commit) and one chat's frames strictly in order (``PerKeyQueues``)."""
        while True:
            frame, line, received_at = await self._queue.get()
            self._room.set()
            kind, buffer_id = _identity(frame)
            event = self._event(frame, line, received_at)
            await self._queues.put(_chat_key(event), functools.partial(self._settle, kind, buffer_id, event))

    def _event(self, frame: IntakeFrame | BadFrame, line: str, received_at: float) -> Inbound | Undecodable:
        # The line as received: it came from a UTF-8 message, so it holds no lone surrogate.
        excerpt = line[:RECORD_EXCERPT_CHARS]
        if isinstance(frame, BadFrame):  # refused by validation: recorded and acked, never replayed forever
            return Undecodable(TRANSPORT, frame.reason, frame.buffer_id, excerpt)
        buffer_id = frame.bufferId
        try:
            decoded = self._decode(frame, received_at)
        except Exception as exc:
            # A bug, not bad input. Replaying the frame would fail the same way at every
            # reconnect, so it is recorded (nothing is dropped silently) and acknowledged.
            log.exception("relay: decoding a %s frame failed", frame.type)
            return Undecodable(TRANSPORT, f"internal error: {exc!r}"[:300], buffer_id, excerpt)
        if isinstance(decoded, str):
            return Undecodable(TRANSPORT, decoded, buffer_id, excerpt)
        if decoded.source.platform not in self.platforms:
            reason = f"platform {decoded.source.platform!r} is not fronted by this gateway"
            return Undecodable(TRANSPORT, reason, decoded.delivery_id, excerpt, decoded.source.platform)
        return decoded

    async def _settle(self, kind: str, buffer_id: str | None, event: Inbound | Undecodable) -> None:
        # The connector cannot be asked again before a reconnect: wait out a storage outage here
        # (in this chat's lane only), so nothing later in the chat is admitted before this one.
        answer = await self._intake.submit(event, patience=WAIT_UNTIL_STOPPED)
        if isinstance(answer, Unavailable):
            return  # not committed: the connector replays it after the reconnect
        if isinstance(answer, Refused):
            log.warning(
                "relay: rejected a %s frame: %s",
                kind,
                answer.message,
                extra={"buffer_id": buffer_id, "code": answer.code, "reason": answer.message},
            )
            await self._ack(buffer_id)
            return
        assert isinstance(event, Inbound)
        self.admitted += answer.new
        await self._ack(buffer_id)
        command = parse_command(event.text) if event.kind in ("text", "command") else None
        if answer.new and command is not None and command.name == "stop":
            # Other gateways of a fleet may run this session: the connector routes the stop to them.
            await self.connection.send_frame(InterruptFrame(session_key=answer.session_key, reason="/stop"))

    def _decode(self, frame: IntakeFrame, received_at: float) -> Inbound | str:
        if isinstance(frame, InboundFrame):
            return to_inbound(frame.event, frame.bufferId, received_at=received_at)
        platform = frame.forward.platform
        if platform != "discord":
            return f"passthrough for platform {platform!r} is not supported (only discord interactions)"
        decoded = decode_interaction(frame.forward.body, received_at=received_at)
        if isinstance(decoded, UnsupportedInteraction):
            return decoded.reason
        return decoded

    async def _ack(self, buffer_id: str | None) -> None:
        if buffer_id is None:
            return
        # Acks ready in the same loop tick share one WebSocket message (``coalesce.py``).
        if await self._acks.send(encode(InboundAckFrame(bufferId=buffer_id))):
            self.acked += 1

    # ------------------------------------------------------------ outbound

    async def request(self, platform: str, action: Action) -> DeliveryResult:
        return _as_delivery(await self.connection.request(action, platform))


def _identity(frame: IntakeFrame | BadFrame) -> tuple[str, str | None]:
    """A delivery's frame type (for the log) and buffer id (for the ack)."""
    if isinstance(frame, BadFrame):
        return frame.frame_type or "", frame.buffer_id
    return frame.type, frame.bufferId


def _chat_key(event: Inbound | Undecodable) -> str:
    """Events of one session always share a lane: it is keyed by what every session key holds."""
    if isinstance(event, Undecodable):
        return ""
    source = event.source
    return f"{source.platform}\0{source.chat_id or ''}\0{'' if source.chat_id else source.user_id or ''}"


def _as_delivery(outcome: Outcome) -> DeliveryResult:
    if isinstance(outcome, Unsent):
        # Nothing left this process: an outage is a deferral, never an attempt that can fail the row.
        return Deferred(outcome.reason, retry_in=2.0)
    if isinstance(outcome, NoResult):
        return Ambiguous(outcome.reason)
    assert isinstance(outcome, OpResult)
    if outcome.success:
        return Delivered(outcome.message_id)
    if outcome.retry_after is not None:
        # The connector's rate limit for this chat (a platform-wide one shows as two chats held).
        return RetryLater(outcome.error or "the connector asked to retry", outcome.retry_after, scope="chat")
    return Rejected(outcome.error or "the connector refused the action")
