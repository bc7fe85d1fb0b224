"""A real gateway subprocess and real WebSocket chat clients, for end-to-end tests."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import websockets
import yaml


async def wait_until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """Poll ``predicate`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def _port_span() -> range:
    """This test worker's own slice of the ports below the kernel's ephemeral range.

    A port asked of the kernel (bind to 0) and released can be handed to another worker
    or to any outgoing connection before the gateway subprocess binds it; a slice of its
    own, outside the ephemeral range, leaves nobody else to take it.
    """
    low = 10000
    try:
        high = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        high = 32768
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) if worker.isdigit() else 0
    count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    width = (high - low) // count
    return range(low + index * width, low + (index + 1) * width)


_next_port: dict[range, int] = {}


def free_port() -> int:
    """A loopback port that is free now, that no other test worker will choose, and that this
    worker has not handed out lately.

    The ports are dealt in turn from a random start in the worker's slice, not drawn at random
    each time: a test that builds a fleet asks for several ports before any process binds one,
    and two draws from the same slice can be equal (a fleet's two gateways on one port, one of
    them failing with "Address already in use"). Dealt in turn, a port comes round again only
    after the whole slice (thousands) has been handed out.
    """
    span = _port_span()
    cursor = _next_port.get(span, random.randrange(len(span)))
    for step in range(len(span)):
        port = span[(cursor + step) % len(span)]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _next_port[span] = (cursor + step + 1) % len(span)
        return port
    raise RuntimeError(f"no free port in {span.start}-{span.stop - 1}")


READY_LINE = " is running: "
READY_TIMEOUT = 90.0
"""A Telegram-enabled ``chatgate run`` spent 6-7 s of CPU before it listened while it imported
aiogram (issue 13 replaced it; now ~0.5-1 s), and prints nothing meanwhile; a shared machine can
still stretch a start many times over. Below the 120 s per-test limit, so a start that never gets
there fails with its log and CPU time instead of a pytest-timeout stack."""


def _cpu_seconds(pid: int) -> str:
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return "an unknown amount"
    return f"{times.user + times.system:.1f}s"


class GatewayProcess:
    """``chatgate run`` in a child process, on a fixed port so clients can reconnect."""

    def __init__(self, tmp: Path, config: dict[str, Any], port: int | None = None) -> None:
        self.tmp = tmp
        self.port = port or free_port()
        self.state_dir = tmp / "state"
        self.config_path = tmp / "chatgate.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0

    async def start(
        self, *extra: str, wait: bool = True, launcher: list[str] | None = None, port: int | None = None
    ) -> None:
        """Start ``chatgate run``; ``launcher`` replaces ``python -m chatgate.app.cli``."""
        self.starts += 1
        log = (self.tmp / f"gateway-{self.starts}.log").open("wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
        command = launcher or [sys.executable, "-m", "chatgate.app.cli"]
        self.proc = await asyncio.create_subprocess_exec(
            *command, "run",
            "--config", str(self.config_path), "--state-dir", str(self.state_dir),
            "--port", str(self.port if port is None else port), *extra,
            stdout=log, stderr=log, env=env,
        )  # fmt: skip
        log.close()
        if wait:
            await self.wait_ready()

    async def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Wait until this start printed ``is running`` (the CLI prints it once the gateway is
        listening and every adapter has started). A gateway that exits or does not get there
        in ``timeout`` fails the test with its log, and is killed rather than left running."""
        assert self.proc is not None
        loop = asyncio.get_running_loop()
        started = loop.time()
        log = self.tmp / f"gateway-{self.starts}.log"
        while READY_LINE not in log.read_text(errors="replace"):
            if self.proc.returncode is not None:
                raise AssertionError(f"gateway exited with {self.proc.returncode}: {self.logs()}")
            if loop.time() - started > timeout:
                cpu = _cpu_seconds(self.proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    await self.kill()
                raise AssertionError(
                    f"gateway did not print {READY_LINE.strip()!r} within {timeout:g}s (it used {cpu} of"
                    f" CPU meanwhile; killed); its log: {self.logs() or '(empty)'}"
                )
            await asyncio.sleep(0.05)

    async def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def terminate(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.proc.wait(), timeout)

    def recorded_preview(self) -> str | None:
        """The preview message id the gateway recorded for its (one) session, read from the file."""
        db = sqlite3.connect(self.state_dir / "chatgate.db", timeout=30)
        try:
            row = db.execute("SELECT preview_message_id FROM sessions").fetchone()
        finally:
            db.close()
        return None if row is None else row[0]

    def logs(self) -> str:
        return "\n".join(
            p.read_text(errors="replace")[-4000:] for p in sorted(self.tmp.glob("gateway-*.log"))
        )


async def start_fleet(
    tmp: Path, config: dict[str, Any], size: int, launcher: list[str] | None = None
) -> list[GatewayProcess]:
    """``size`` gateway processes on one configuration (a shared store), each in ``tmp/p<i>``."""
    fleet = []
    for i in range(size):
        (tmp / f"p{i}").mkdir()
        fleet.append(GatewayProcess(tmp / f"p{i}", config))
    await asyncio.gather(*(g.start(launcher=launcher) for g in fleet))
    return fleet


async def stop_fleet(fleet: list[GatewayProcess]) -> None:
    """Stop every process still running, whatever failed before: none may outlive the test."""
    for gateway in fleet:
        if gateway.proc is not None and gateway.proc.returncode is None:
            try:
                await gateway.terminate()
            except Exception:  # it did not stop in time
                await gateway.kill()


@dataclass
class ChatClient:
    """A web chat user who keeps resending unacknowledged messages after reconnects."""

    url: str
    chat_id: str
    messages: list[tuple[str, str]]
    window: int = 3
    acked: set[str] = field(default_factory=set)
    acked_at: dict[str, float] = field(default_factory=dict)
    """message id -> ``time.monotonic()`` of its first ack."""
    duplicate_acks: set[str] = field(default_factory=set)
    finals: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """in_reply_to -> every (message_id, text) final frame received for it."""
    first_final_order: list[str] = field(default_factory=list)
    final_connections: dict[str, list[int]] = field(default_factory=dict)
    """in_reply_to -> the connection (``connects`` at the time) each of its final frames came on:
    the protocol re-sends an unconfirmed reply after every ``hello``, never twice on one connection."""
    connects: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    disconnects: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return all(mid in self.finals for mid, _ in self.messages)

    async def run(self, stop: asyncio.Event) -> None:
        while not self.done and not stop.is_set():
            try:
                await self._session(stop)
            except (OSError, websockets.ConnectionClosed, websockets.InvalidHandshake, TimeoutError) as exc:
                self.disconnects.append(type(exc).__name__)
            if not self.done:
                await asyncio.sleep(0.05)

    async def _session(self, stop: asyncio.Event) -> None:
        async with websockets.connect(self.url, open_timeout=5, max_size=None) as ws:
            self.connects += 1
            await ws.send(
                json.dumps({"type": "hello", "chat_id": self.chat_id, "user_id": "u-" + self.chat_id})
            )
            ready = False
            sent: set[str] = set()
            while not self.done and not stop.is_set():
                if ready:
                    for mid, text in self.messages:
                        if mid in sent or mid in self.acked:
                            continue
                        in_flight = len(sent - self.acked)
                        if in_flight >= self.window:
                            break
                        await ws.send(json.dumps({"type": "message", "id": mid, "text": text}))
                        sent.add(mid)
                frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                kind = frame["type"]
                if kind == "ready":
                    ready = True
                elif kind == "ack":
                    self.acked.add(frame["id"])
                    self.acked_at.setdefault(frame["id"], time.monotonic())
                    if frame["duplicate"]:
                        self.duplicate_acks.add(frame["id"])
                elif kind in ("final", "notice"):
                    if kind == "final":
                        reply_to = frame["in_reply_to"]
                        if reply_to not in self.finals:
                            self.first_final_order.append(reply_to)
                        self.finals.setdefault(reply_to, []).append((frame["message_id"], frame["text"]))
                        self.final_connections.setdefault(reply_to, []).append(self.connects)
                    await ws.send(json.dumps({"type": "received", "message_id": frame["message_id"]}))
                elif kind == "error":
                    self.errors.append(frame)


class FrameClient:
    """One web chat connection that records every frame it receives, in order.

    It confirms every ``final`` and ``notice`` (as the protocol asks) and lets a test wait
    for a frame matching a predicate without losing the frames around it.
    """

    def __init__(self, port: int, chat_id: str, user_id: str, user_name: str | None = None) -> None:
        self.url = f"ws://127.0.0.1:{port}/ws"
        self.chat_id, self.user_id, self.user_name = chat_id, user_id, user_name
        self.frames: list[dict[str, Any]] = []
        self._ws: Any = None
        self._reader: asyncio.Task[None] | None = None

    async def connect(self, timeout: float = 30.0) -> None:
        """Connect, say hello and wait for ``ready`` (frames of earlier connections are kept)."""
        start = len(self.frames)
        self._ws = await websockets.connect(self.url, open_timeout=timeout, max_size=None)
        hello: dict[str, Any] = {"type": "hello", "chat_id": self.chat_id, "user_id": self.user_id}
        if self.user_name:
            hello["user_name"] = self.user_name
        await self._ws.send(json.dumps(hello))
        self._reader = asyncio.create_task(self._read(self._ws))
        await self.wait_for(lambda f: f["type"] == "ready", after=start, timeout=timeout)

    async def _read(self, ws: Any) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for raw in ws:
                frame = json.loads(raw)
                self.frames.append(frame)
                if frame.get("type") in ("final", "notice"):
                    await ws.send(json.dumps({"type": "received", "message_id": frame["message_id"]}))

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
        self._ws = self._reader = None

    async def send(self, frame: dict[str, Any]) -> None:
        await self._ws.send(json.dumps(frame))

    async def message(self, msg_id: str, text: str) -> None:
        await self.send({"type": "message", "id": msg_id, "text": text})

    async def tap(self, prompt_id: str, option_id: str, tap_id: str | None = None) -> None:
        frame = {"type": "button", "prompt_id": prompt_id, "option_id": option_id}
        if tap_id is not None:
            frame["id"] = tap_id
        await self.send(frame)

    def mark(self) -> int:
        """The index of the next frame: pass it as ``after`` to wait only for newer frames."""
        return len(self.frames)

    async def wait_for(
        self, predicate: Any, *, after: int = 0, timeout: float = 30.0, what: str = "a frame"
    ) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for frame in self.frames[after:]:
                if predicate(frame):
                    return frame
            if loop.time() > deadline:
                raise AssertionError(
                    f"{self.user_id}: timed out waiting for {what}; got {self.frames[after:]}"
                )
            await asyncio.sleep(0.01)

    async def final(self, in_reply_to: str, timeout: float = 30.0) -> dict[str, Any]:
        return await self.wait_for(
            lambda f: f["type"] == "final" and f.get("in_reply_to") == in_reply_to,
            timeout=timeout,
            what=f"the final of {in_reply_to}",
        )

    async def prompt(self, *, after: int = 0, timeout: float = 30.0) -> dict[str, Any]:
        return await self.wait_for(
            lambda f: f["type"] == "prompt", after=after, timeout=timeout, what="a prompt"
        )

    def of(self, kind: str, *, after: int = 0, prompt_id: str | None = None) -> list[dict[str, Any]]:
        return [
            f
            for f in self.frames[after:]
            if f["type"] == kind and (prompt_id is None or f.get("prompt_id") == prompt_id)
        ]


def fleet_clients(
    fleet: list[GatewayProcess], chats: int, per_chat: int, window: int = 2
) -> list[ChatClient]:
    """One web chat client a chat, spread over the fleet's ports, each with ``per_chat`` messages."""
    return [
        ChatClient(
            f"ws://127.0.0.1:{fleet[c % len(fleet)].port}/ws",
            f"chat{c}",
            [(f"c{c}m{i}", f"message {i} of chat {c}") for i in range(per_chat)],
            window=window,
        )
        for c in range(chats)
    ]


def admitted_order(delivery_ids: Iterable[object]) -> dict[str, list[str]]:
    """Per chat, the message ids in the order the inbox admitted them (web chat delivery ids)."""
    admitted: dict[str, list[str]] = {}
    for delivery_id in delivery_ids:
        chat, _, mid = str(delivery_id).partition(":")[2].partition("/")
        admitted.setdefault(chat, []).append(mid)
    return admitted
