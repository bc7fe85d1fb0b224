"""A TCP relay in front of the real PostgreSQL that can lose a commit's answer.

``drop_after_commit()`` arms it: the next ``COMMIT`` a client sends is passed to the server,
the server's answer is read (so the commit happened), and then the client's socket is closed
without it. That is the one failure a client cannot tell apart from a commit that never
ran: the in-doubt transaction.

``fail_after_commit()`` arms the other failure: the next ``COMMIT`` is answered, and the
connection is closed at the client's next message (asyncpg's reset as the pool takes the
connection back), so the error comes after a commit the client heard of.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit, urlunsplit

_COMMIT = b"Q\x00\x00\x00\x0cCOMMIT;\x00"  # asyncpg ends a transaction with this simple query


class CommitDroppingProxy:
    """Owns its listening socket and one pair of relay tasks per connection (closed by ``aclose``)."""

    def __init__(self, dsn: str) -> None:
        parts = urlsplit(dsn)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._parts = parts
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._armed = False
        self._fail_armed = False
        self.dropped = 0
        """Commits whose answer was withheld so far."""

    async def start(self) -> str:
        """Listen on a free port of 127.0.0.1; returns the DSN to connect through it."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        user = f"{self._parts.username}@" if self._parts.username else ""
        return urlunsplit(self._parts._replace(netloc=f"{user}127.0.0.1:{port}"))

    def drop_after_commit(self) -> None:
        self._armed = True

    def fail_after_commit(self) -> None:
        self._fail_armed = True

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(*self._upstream)
        answered = asyncio.Event()
        withhold = asyncio.Event()

        async def up() -> None:
            committed = False
            while data := await client_r.read(65536):
                if committed:  # the message after the answered commit: the connection fails now
                    self.dropped += 1
                    break
                if self._fail_armed and _COMMIT in data:
                    self._fail_armed = False
                    committed = True
                if self._armed and _COMMIT in data:
                    self._armed = False
                    withhold.set()
                    answered.clear()
                    server_w.write(data)
                    await server_w.drain()
                    await answered.wait()  # the server committed and said so
                    self.dropped += 1
                    break
                server_w.write(data)
                await server_w.drain()

        async def down() -> None:
            while data := await server_r.read(65536):
                if withhold.is_set():
                    answered.set()
                    return
                client_w.write(data)
                await client_w.drain()

        tasks = [asyncio.ensure_future(up()), asyncio.ensure_future(down())]
        self._tasks.update(tasks)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.difference_update(tasks)
            for writer in (client_w, server_w):
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
