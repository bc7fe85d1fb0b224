"""``RelaySimulator``: a local relay connector speaking the Hermes relay contract v1.

One port serves the gateway WebSocket at ``/relay`` and the JSON control routes
under ``/sim/``. The in-process API below is what tests drive; the control
routes mirror it for a simulator run from the command line.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from chatgate.app.netaddr import listen_tcp
from relaysim.auth import TokenRejected, bearer, verify_token
from relaysim.buffer import DurableBuffer, Entry
from relaysim.control import control_routes
from relaysim.descriptors import descriptors_by_platform
from relaysim.link import Link, LinkClosed, LinkContext
from relaysim.media_host import MediaHost
from relaysim.state import (
    RESULT_MODES,
    Counters,
    Delivery,
    GatewayState,
    Hello,
    Interrupt,
    ReceivedOp,
    ResultMode,
    ResultPolicy,
    SimMessage,
)

log = logging.getLogger(__name__)
STOP_TIMEOUT = 5.0


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: whoever runs the simulator owns shutdown."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class RelaySimulator:
    """The connector side of the relay: auth, descriptors, outbound results, and a durable inbound buffer."""

    def __init__(
        self,
        db_path: Path | str,
        secrets: Mapping[str, Sequence[str]],
        platforms: Sequence[Mapping[str, Any]] = ({"platform": "discord"},),
        *,
        ack_timeout: float = 5.0,
        allow_remote_control: bool = False,
    ) -> None:
        self._secrets: dict[str, list[str]] = {gw: list(values) for gw, values in secrets.items()}
        self.descriptors = descriptors_by_platform(platforms)
        if not self.descriptors:
            raise ValueError("the relay simulator needs at least one platform")
        self.buffer = DurableBuffer(db_path)
        self.allow_remote_control = allow_remote_control
        self._ack_timeout = ack_timeout
        self._states: dict[str, GatewayState] = {}
        self._rejected = Counters()  # 4401 closes of tokens that name no known gateway
        self._links: set[Link] = set()
        self._numbers = 0
        self._changed = asyncio.Event()
        self._server: _Server | None = None
        self._server_task: asyncio.Task[None] | None = None
        self._stopping = False
        self.host = "127.0.0.1"
        self.port = 0
        self.media = MediaHost(lambda: self._secrets, lambda: self.base_url)
        """``POST /relay/media``: the re-host ``send_media`` names its files by."""

    # -- lifetime ---------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def relay_url(self) -> str:
        return "ws" + self.base_url.removeprefix("http") + "/relay"

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Open the buffer, listen, and return the base URL (``http://host:port``)."""
        await self.buffer.open()
        try:
            sock = listen_tcp(host, port, backlog=128)
        except OSError:
            await self.buffer.close()
            raise
        self.host, self.port = host, sock.getsockname()[1]
        routes = [WebSocketRoute("/relay", self._relay_endpoint), *control_routes(self), *self.media.routes()]
        app = Starlette(routes=routes)
        config = uvicorn.Config(
            app,
            log_config=None,
            lifespan="off",
            ws="websockets-sansio",
            ws_max_size=4 * 1024 * 1024,
            ws_ping_interval=20.0,
        )
        self._server = _Server(config)
        self._server_task = asyncio.create_task(self._server.serve(sockets=[sock]), name="relaysim-http")
        while not self._server.started:
            if self._server_task.done():
                await self._server_task
                await self.buffer.close()
                raise RuntimeError("the relay simulator's HTTP server stopped during start-up")
            await asyncio.sleep(0.01)
        log.info("relay simulator listening on %s", self.relay_url)
        return self.base_url

    async def stop(self) -> None:
        """Close every gateway connection (1001), stop listening, close the buffer."""
        self._stopping = True
        self.media.release()  # a stalled upload must not hold up the server's shutdown
        links = list(self._links)
        for link in links:
            link.request_close(1001, "relay simulator shutting down")
        if links:
            await asyncio.wait(
                [asyncio.create_task(link.finished.wait()) for link in links], timeout=STOP_TIMEOUT
            )
        if self._server is not None and self._server_task is not None:
            self._server.should_exit = True
            done, _ = await asyncio.wait({self._server_task}, timeout=STOP_TIMEOUT)
            if not done:
                self._server.force_exit = True
                await asyncio.gather(self._server_task, return_exceptions=True)
        self._server = self._server_task = None
        await self.buffer.close()

    # -- the gateway socket -----------------------------------------------------------------------

    async def _relay_endpoint(self, ws: WebSocket) -> None:
        await ws.accept()
        try:
            gateway_id = verify_token(bearer(ws.headers.get("authorization")), self._secrets)
        except TokenRejected as rejected:
            known = rejected.gateway_id in self._states or rejected.gateway_id in self._secrets
            counters = self._state(rejected.gateway_id).counters if known and rejected.gateway_id else None
            (counters or self._rejected).closes_4401 += 1
            log.warning(
                "relay connection refused (4401 %s): %s",
                rejected.reason,
                rejected.detail,
                extra={"gateway_id": rejected.gateway_id},
            )
            self._notify()
            await ws.close(code=4401, reason=rejected.reason)
            return
        if self._stopping:
            await ws.close(code=1001, reason="relay simulator shutting down")
            return
        state = self._state(gateway_id)
        self._numbers += 1
        media_missing = self.media.missing
        context = LinkContext(self.buffer, self.descriptors, self._ack_timeout, self._notify, media_missing)
        link = Link(ws, self._numbers, state, context)
        previous, state.link = state.link, link
        if previous is not None:
            previous.request_close(1008, "replaced by a newer connection for this gateway id")
        state.counters.connections += 1
        self._links.add(link)
        log.info("gateway connected", extra={"gateway_id": gateway_id, "connection": link.number})
        self._notify()
        try:
            await link.serve()
        finally:
            self._links.discard(link)
            if state.link is link:
                state.link = None
            self._notify()

    # -- injecting deliveries ---------------------------------------------------------------------

    async def inject_inbound(self, gateway_id: str, event: Mapping[str, Any]) -> str:
        """Buffer an ``inbound`` event for the gateway (durably), deliver it if live; return its bufferId."""
        return await self._inject(gateway_id, {"type": "inbound", "event": dict(event)})

    async def inject_passthrough(
        self,
        gateway_id: str,
        body: bytes,
        platform: str = "discord",
        bot_id: str | None = None,
        *,
        method: str = "POST",
        path: str | None = None,
        headers: Sequence[tuple[str, str]] = (("content-type", "application/json"),),
    ) -> str:
        """Buffer a ``passthrough_forward`` (the raw body, as a Discord interaction would arrive)."""
        bot = bot_id or self._state(gateway_id).bots.get(platform) or "sim-bot"
        forward = {
            "platform": platform,
            "botId": bot,
            "method": method,
            "path": path or f"/interactions/{bot}",
            "headers": [[k, v] for k, v in headers],
            "bodyB64": base64.b64encode(body).decode("ascii"),
        }
        return await self._inject(gateway_id, {"type": "passthrough_forward", "forward": forward})

    async def _inject(self, gateway_id: str, frame: dict[str, Any]) -> str:
        entry: Entry = await self.buffer.append(gateway_id, frame)
        self._notify()
        link = self._state(gateway_id).link
        if link is not None:
            try:
                await link.flush()
            except LinkClosed as exc:
                log.info(
                    "delivery deferred to the next connection: %s", exc, extra={"gateway_id": gateway_id}
                )
        return str(entry.buffer_id)

    async def send_interrupt(self, gateway_id: str, session_key: str, chat_id: str) -> bool:
        """Send ``interrupt_inbound`` now; False if the gateway has no handshaken connection."""
        link = self._state(gateway_id).link
        if link is None or not link.handshaken:
            return False
        try:
            await link.send_interrupt(session_key, chat_id)
        except LinkClosed:
            return False
        return True

    # -- controlling connections ------------------------------------------------------------------

    async def send_raw(self, gateway_id: str, text: str) -> bool:
        """Write ``text`` as-is to the gateway's socket (malformed frames); False if not connected."""
        link = self._state(gateway_id).link
        if link is None or not link.handshaken:
            return False
        await link.send_text(text)
        return True

    def lose_acks(self, gateway_id: str, lose: bool = True) -> None:
        """Drop the gateway's acks from now on, as if it died between its commit and its ack."""
        self._state(gateway_id).lose_acks = lose

    def lost_acks(self, gateway_id: str) -> list[str]:
        return list(self._state(gateway_id).lost_acks)

    def set_secrets(self, gateway_id: str, secrets: Sequence[str]) -> None:
        self._secrets[gateway_id] = list(secrets)

    def revoke(self, gateway_id: str) -> None:
        """Drop the gateway's secrets and close its live connection with 4401 "unauthorized"."""
        self._secrets.pop(gateway_id, None)
        state = self._state(gateway_id)
        if state.link is not None:
            state.counters.closes_4401 += 1
            state.link.request_close(4401, "unauthorized")
        log.info("gateway revoked", extra={"gateway_id": gateway_id})
        self._notify()

    async def drop_connection(self, gateway_id: str, timeout: float = STOP_TIMEOUT) -> bool:
        """End the live connection without a close frame (a network blip); False if there was none."""
        link = self._state(gateway_id).link
        if link is None:
            return False
        link.request_drop()
        await asyncio.wait_for(link.finished.wait(), timeout)
        return True

    def set_result_policy(self, gateway_id: str, mode: ResultMode, delay: float = 0.0) -> None:
        """Modes: "ok" answers, "never" swallows, "fail" answers success:false; ``delay`` holds results."""
        if mode not in RESULT_MODES:
            raise ValueError(f"result mode must be one of {RESULT_MODES}, not {mode!r}")
        if delay < 0:
            raise ValueError("delay must not be negative")
        self._state(gateway_id).policy = ResultPolicy(mode, float(delay))

    # -- observing --------------------------------------------------------------------------------

    def connected(self, gateway_id: str) -> bool:
        return self._state(gateway_id).link is not None

    def idle(self, gateway_id: str) -> bool:
        return self._state(gateway_id).idle

    def ops(self, gateway_id: str) -> list[ReceivedOp]:
        return list(self._state(gateway_id).ops)

    def messages(self, gateway_id: str) -> list[SimMessage]:
        return list(self._state(gateway_id).messages.values())

    def deliveries(self, gateway_id: str) -> list[Delivery]:
        return list(self._state(gateway_id).deliveries)

    def interrupts(self, gateway_id: str) -> list[Interrupt]:
        return list(self._state(gateway_id).interrupts)

    def hellos(self, gateway_id: str) -> list[Hello]:
        return list(self._state(gateway_id).hellos)

    def unacked(self, gateway_id: str) -> list[str]:
        return [str(e.buffer_id) for e in self.buffer.pending(gateway_id)]

    def counters(self, gateway_id: str | None = None) -> Counters:
        """One gateway's counters, or (None) the totals including refused unknown tokens."""
        if gateway_id is not None:
            return self._state(gateway_id).counters
        total = Counters(**self._rejected.to_json())
        for state in self._states.values():
            for name, value in state.counters.to_json().items():
                setattr(total, name, getattr(total, name) + value)
        return total

    def gateway_ids(self) -> list[str]:
        return sorted(set(self._states) | set(self._secrets))

    async def wait_for_op(
        self, gateway_id: str, predicate: Callable[[ReceivedOp], bool], timeout: float
    ) -> ReceivedOp:
        """The first received op (past or future) that matches; TimeoutError if none in time."""

        def found() -> ReceivedOp | None:
            return next((op for op in self._state(gateway_id).ops if predicate(op)), None)

        op: ReceivedOp = await self._wait(found, timeout, f"no matching outbound op from {gateway_id!r}")
        return op

    async def wait_acked(self, buffer_id: str, timeout: float) -> None:
        """Wait until the gateway has acknowledged the entry; TimeoutError if it does not in time."""
        number = int(buffer_id)
        await self._wait(
            lambda: not self.buffer.is_pending(number) or None, timeout, f"no ack for {buffer_id}"
        )

    async def wait_connected(self, gateway_id: str, timeout: float, *, handshaken: bool = True) -> None:
        def ready() -> bool | None:
            link = self._state(gateway_id).link
            return (link is not None and (link.handshaken or not handshaken)) or None

        await self._wait(ready, timeout, f"gateway {gateway_id!r} did not connect")

    async def wait_live(self, gateway_id: str, timeout: float) -> None:
        """Wait until the gateway's connection has replayed its buffer and gets new entries as they come."""

        def live() -> bool | None:
            link = self._state(gateway_id).link
            return (link is not None and link.live) or None

        await self._wait(live, timeout, f"gateway {gateway_id!r} did not finish its replay")

    async def _wait(self, probe: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while (value := probe()) is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{what} within {timeout:.1f}s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return value

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _state(self, gateway_id: str) -> GatewayState:
        state = self._states.get(gateway_id)
        if state is None:
            state = self._states[gateway_id] = GatewayState(gateway_id)
        return state
