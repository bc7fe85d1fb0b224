"""A client that never reads costs a bounded number of bytes, and any backlog syncs.

Real parts: a gateway subprocess or an in-process gateway on its real HTTP server,
raw TCP WebSocket clients with a tiny receive buffer that never read, and RSS read
from the kernel (psutil).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import socket
import sqlite3
import struct
from pathlib import Path

import httpx
import psutil

from chatgate.domain.outbox import OutboxDraft
from chatgate.store.sqlite import SqliteStore
from support.procs import GatewayProcess
from support.web_harness import StartGateway, WebClient, web_config

MiB = 1024 * 1024


def _ws_frame(text: str) -> bytes:
    """One masked client text frame (RFC 6455 5.2)."""
    payload = text.encode("utf-8")
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        header = struct.pack("!BB", 0x81, 0x80 | n)
    elif n < 1 << 16:
        header = struct.pack("!BBH", 0x81, 0x80 | 126, n)
    else:
        header = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


class DeafClient:
    """A WebSocket client that completes the handshake, sends frames and never reads again."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, port: int) -> DeafClient:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=4096)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        assert head.startswith(b"HTTP/1.1 101"), head
        writer.transport.pause_reading()  # from here on nothing is read: the kernel buffer fills
        return cls(reader, writer)

    async def send(self, frame: dict[str, object]) -> bool:
        """``False`` once the gateway has closed the socket."""
        try:
            self.writer.write(_ws_frame(json.dumps(frame)))
            await asyncio.wait_for(self.writer.drain(), 30)
        except (ConnectionError, TimeoutError):
            return False
        return True

    def close(self) -> None:
        self.writer.transport.abort()


def _peak_rss(pid: int) -> int:
    """The process's high-water RSS (``VmHWM``): what it held at its worst, not what it kept."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/<pid>/status")


def _reset_peak(pid: int) -> None:
    """Start the high-water mark from now (writing 5 to clear_refs resets it, Linux >= 4.0)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


async def _status(port: int) -> dict[str, object]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        info = (await http.get("/status")).json()
    assert isinstance(info, dict)
    return info


async def _settled(port: int) -> bool:
    info = await _status(port)
    return info.get("queue_depth") == 0 and info.get("running_turns") == 0


async def _until_settled(port: int) -> None:
    for _ in range(600):
        if await _settled(port):
            return
        await asyncio.sleep(0.2)
    raise AssertionError("the gateway did not finish the turns in 120 s")


def _deaf_replies(gateway: GatewayProcess) -> int:
    db = sqlite3.connect(gateway.state_dir / "chatgate.db")
    try:
        (answered,) = db.execute("SELECT COUNT(*) FROM outbox WHERE chat_id LIKE 'chat-deaf-%'").fetchone()
    finally:
        db.close()
    return int(answered)


async def _deaf_replies_when_settled(gateway: GatewayProcess, expected: int) -> int:
    """The deaf chats' replies once they are all recorded and the gateway is idle (at most 120 s)."""
    answered = 0
    for _ in range(600):
        answered = await asyncio.to_thread(_deaf_replies, gateway)
        if answered >= expected and await _settled(gateway.port):
            break
        await asyncio.sleep(0.2)
    return answered


async def test_clients_that_never_read_cost_the_gateway_a_bounded_amount_of_memory(tmp_path: Path) -> None:
    bound = 256 * 1024
    sockets, messages, text_chars = 8, 8, 16_000
    gateway = GatewayProcess(
        tmp_path,
        {
            "agent": {"echo": {"chunk_delay_ms": 0, "chunk_chars": 40}},
            "platforms": {
                "web": {"draft_interval_ms": 0, "max_queued_bytes": bound, "max_text_chars": text_chars}
            },
        },
    )
    await gateway.start()
    assert gateway.proc is not None
    try:
        warm = await WebClient.connect(gateway.port)
        await warm.hello("chat-warm")
        await warm.ask("w1", "x" * text_chars)
        await warm.close()
        before = psutil.Process(gateway.proc.pid).memory_info().rss
        _reset_peak(gateway.proc.pid)

        deaf = [await DeafClient.connect(gateway.port) for _ in range(sockets)]
        for n, client in enumerate(deaf):
            await client.send({"type": "hello", "chat_id": f"chat-deaf-{n}-4711", "user_id": "u-secret"})
        for i in range(messages):
            for n, client in enumerate(deaf):
                await client.send(
                    {"type": "message", "id": f"m{i}", "text": f"{n}:{i} " + "y" * (text_chars - 10)}
                )
        # Every turn answered (or given up) and nothing left queued: the replies were all produced.
        # (Settled alone is not enough: on a busy machine the frames may not be read yet.)
        answered = await _deaf_replies_when_settled(gateway, sockets * messages)
        grown = _peak_rss(gateway.proc.pid) - before
        assert answered == sockets * messages, "every deaf client's message was admitted and answered"

        # Each reply streamed ~400 drafts of up to 16 kB: ~3 MB a message, 190 MB in all, had
        # every draft been queued. Coalesced and bounded, each socket holds at most ``bound``.
        allowed = sockets * bound * 4 + 48 * MiB
        assert grown < allowed, (
            f"RSS grew {grown / MiB:.0f} MiB for {sockets} deaf clients (allowed {allowed / MiB:.0f})"
        )

        fresh = await WebClient.connect(gateway.port)
        await fresh.hello("chat-fresh")
        assert (await fresh.ask("f1", "still serving?"))[-1]["text"] == "echo: still serving?"
        await fresh.close()
        info = await _status(gateway.port)
        for secret in ("4711", "u-secret"):
            assert secret not in json.dumps(info.get("last_error")), info.get("last_error")
        for client in deaf:
            client.close()
    finally:
        with contextlib.suppress(ProcessLookupError):
            await gateway.kill()


async def test_a_ten_thousand_reply_backlog_syncs_completely_and_in_order(
    tmp_path: Path, start_gateway: StartGateway
) -> None:
    total = 10_000
    store = SqliteStore(tmp_path / "state0" / "chatgate.db")
    await store.open()
    try:
        await store.enqueue_outbox(
            [
                OutboxDraft(
                    idem_key=f"backlog-{i}",
                    platform="web",
                    chat_id="chat-backlog",
                    session_key="agent:main:web:dm:chat-backlog",
                    kind="final",
                    text=f"reply {i} " + "z" * 200,
                    in_reply_to=f"m{i}",
                    target={"chat_id": "chat-backlog"},
                )
                for i in range(total)
            ]
        )
    finally:
        await store.close()
    # Delivered to an earlier socket that went away before confirming any of them (a browser tab
    # closed mid-stream): the next hello must show them all.
    db = sqlite3.connect(tmp_path / "state0" / "chatgate.db")
    with db:
        db.execute("UPDATE outbox SET status = 'sent', sent_at = created_at, attempts = 1")
    db.close()
    gateway = await start_gateway()
    assert gateway.port is not None
    client = await WebClient.connect(gateway.port)
    try:
        await client.hello("chat-backlog")
        order: list[str] = []
        seen: set[str] = set()

        def complete() -> bool:
            return len(seen) == total

        while not complete():
            frame = await client.recv()
            if frame["type"] == "final" and frame["in_reply_to"] not in seen:
                seen.add(frame["in_reply_to"])
                order.append(frame["in_reply_to"])
        assert order == [f"m{i}" for i in range(total)]
        # The socket is still open and serving after the sync.
        frames = await client.ask("after", "synced")
        assert frames[-1]["text"] == "echo: synced"
    finally:
        await client.close()


class _TooSlow(logging.Handler):
    """Set once the gateway logs that it closes a client for not reading (the loop's thread)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "code", None) == "too_slow":
            self._seen.set()

    async def wait(self) -> None:
        await self._seen.wait()


async def test_a_client_over_the_byte_bound_is_closed_with_a_reason_and_resyncs_on_hello(
    start_gateway: StartGateway,
) -> None:
    config = web_config(
        agent={"echo": {"chunk_delay_ms": 0, "chunk_chars": 4000}},
        platforms={"web": {"max_queued_bytes": 64 * 1024, "draft_interval_ms": 0}},
    )
    gateway = await start_gateway(config)
    assert gateway.port is not None
    given_up = _TooSlow()
    logging.getLogger("chatgate.platforms.webchat.connection").addHandler(given_up)
    COUNT = 300
    deaf = await DeafClient.connect(gateway.port)
    await deaf.send({"type": "hello", "chat_id": "chat-over", "user_id": "u1"})
    # 300 finals of 16 kB: 4.8 MB, past the kernel's socket buffers (up to 4 MiB) and the 64 kB bound.
    for i in range(COUNT):
        if not await deaf.send({"type": "message", "id": f"m{i}", "text": f"{i} " + "q" * 15_900}):
            break  # closed already: the gateway read (and answers) only what came before
    # Read as soon as the gateway gave up on us: its close frame waits behind what the kernel
    # holds, and a client that never answers the close is cut off (frame and all) after the
    # server's close timeout, which a loaded machine's turns can outlast.
    try:
        async with asyncio.timeout(120):
            await given_up.wait()
    finally:
        logging.getLogger("chatgate.platforms.webchat.connection").removeHandler(given_up)
    deaf.writer.transport.resume_reading()  # now read what the gateway sent, up to its close frame
    reader = deaf.reader
    data = b""
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        while chunk := await asyncio.wait_for(reader.read(1 << 20), 30):
            data += chunk
    await _until_settled(gateway.port)
    close_at = data.rfind(b"\x88")  # the close frame: FIN + opcode 8, unmasked from the server
    assert close_at >= 0, "the gateway did not close the socket"
    length = data[close_at + 1]
    payload = data[close_at + 2 : close_at + 2 + length]
    code = struct.unpack("!H", payload[:2])[0]
    assert code == 4008 and payload[2:].startswith(b"too_slow"), payload
    deaf.close()

    again = await WebClient.connect(gateway.port)
    await again.hello("chat-over")
    backlog = await again.sync()
    # Every reply the gateway committed comes again (what it never read was never acknowledged).
    stored = [r.in_reply_to for r in await gateway.store.unconfirmed_for_chat("web", "chat-over")]
    assert [f["in_reply_to"] for f in backlog if f["type"] == "final"] == stored
    assert len(stored) >= 100
    await again.close()
