"""The HTTP stack imported off the loop, and the server started by its first connection when
the gateway's platforms bring no route.

Such a gateway (Telegram polling, Discord, Slack in Socket Mode, with no webhook routes)
serves only ``/healthz``, ``/readyz``, ``/status`` and ``/metrics``, and many are never
asked: uvicorn and starlette alone cost it about 3.7 MB of memory for its whole life. Its
socket is bound and listening from the start as before (a port in use still fails the start),
and a connection that arrives waits in the kernel's backlog while the first one has the HTTP
stack imported in a thread and the server started, which then accepts it.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import socket
from collections.abc import Awaitable, Callable

from chatgate.domain.tasks import cancel_and_wait

log = logging.getLogger(__name__)

HTTP_STACK = ("chatgate.app.http.server", "chatgate.app.http.app")
"""uvicorn, starlette and the ASGI app: the largest share of a start's imports."""


def import_http_stack() -> None:
    """Blocking (module files are read): in a thread."""
    for name in HTTP_STACK:
        importlib.import_module(name)


class StartOnFirstConnection:
    """Watches a listening socket for its first connection and runs ``start`` once then."""

    def __init__(self, sock: socket.socket, start: Callable[[], Awaitable[None]]) -> None:
        self._sock = sock
        self._start = start
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    def arm(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._sock.fileno(), self._knocked)

    def _knocked(self) -> None:
        self._disarm()
        self._task = asyncio.create_task(self._run(), name="chatgate-http-start")

    async def _run(self) -> None:
        try:
            await self._start()
        except Exception:
            # Nothing is left to accept what waits: refuse it and what comes, instead of a
            # backlog that holds every client until its own timeout.
            log.exception("the HTTP server failed to start at its first connection; the port is closed")
            self._sock.close()

    def _disarm(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._loop = None

    async def aclose(self) -> None:
        """No start from now on; a start under way is cancelled (its server is the caller's to stop)."""
        self._disarm()
        if self._task is not None:
            await cancel_and_wait([self._task])
