"""Hostile HTTP clients on real loopback sockets: idle WebSockets and bodies sent a byte at a time.

Each attacker can bind its own source address (127.0.0.2, 127.0.0.3...: every 127/8 address is
this machine's on Linux), so a test can play many strangers at once, and a well-behaved client
on 127.0.0.1 is a different address from all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

HANDSHAKE = (
    "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


def source(n: int) -> str:
    """The n-th attacker's source address: 127.0.1.x, 127.0.2.x... (never 127.0.0.1)."""
    return f"127.0.{1 + n // 250}.{1 + n % 250}"


@dataclass
class IdleSocket:
    """A WebSocket whose handshake completed and that never says anything."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    status: bytes

    @property
    def upgraded(self) -> bool:
        return self.status.startswith(b"HTTP/1.1 101")

    async def closed_by_server(self, timeout: float) -> bytes:
        """Everything the server sent until it closed the connection (fails after ``timeout``)."""
        data = b""
        async with asyncio.timeout(timeout):
            while chunk := await self.reader.read(4096):
                data += chunk
        return data

    def close(self) -> None:
        self.writer.close()


async def idle_websocket(port: int, address: str) -> IdleSocket:
    """Open ``/ws`` from ``address`` and complete the handshake (or read the refusal)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))
    writer.write(HANDSHAKE.format(port=port).encode())
    await writer.drain()
    try:
        status = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    except (asyncio.IncompleteReadError, ConnectionError, TimeoutError) as exc:
        status = f"closed: {type(exc).__name__}".encode()
    return IdleSocket(reader, writer, status)


@dataclass
class Trickle:
    """A POST whose headers are sent at once and whose body comes a byte a second."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    sent: int = 0
    answer: bytes = b""
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    async def _drip(self, length: int, interval: float) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while self.sent < length - 1:
                self.writer.write(b"x")
                await self.writer.drain()
                self.sent += 1
                await asyncio.sleep(interval)

    async def until_answered(self, timeout: float) -> bytes:
        """What the server answered before it closed the connection (fails after ``timeout``)."""
        async with asyncio.timeout(timeout):
            with contextlib.suppress(ConnectionError):
                while chunk := await self.reader.read(4096):
                    self.answer += chunk
        return self.answer

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        self.writer.close()


async def trickle(
    port: int,
    path: str,
    address: str = "127.0.0.1",
    length: int = 1000,
    interval: float = 1.0,
    headers: dict[str, str] | None = None,
) -> Trickle:
    """Start a POST of ``length`` bytes to ``path`` from ``address``, one byte per ``interval``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n"
    )
    writer.write(head.encode())
    await writer.drain()
    slow = Trickle(reader, writer)
    slow.task = asyncio.create_task(slow._drip(length, interval))
    return slow
