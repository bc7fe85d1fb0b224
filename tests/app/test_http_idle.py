"""An idle HTTP server does not wake its loop, and every answer still carries the current Date.

uvicorn's own main loop ticks ten times a second (ours ticked once) to refresh the ``Date``
header and look for a stop. A gateway whose only HTTP clients are an occasional probe spent
those wakeups for nothing; the date is now made when an answer asks for it. The server runs
here on a loop of its own whose selector counts how often it returns: the real seam where a
wakeup shows, on a real socket on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import email.utils
import selectors
import time
from typing import Any

from starlette.types import Receive, Scope, Send

from chatgate.app.config.model import HttpConfig
from chatgate.app.gateway import bind_socket
from chatgate.app.http.server import http_server
from chatgate.platforms.kit.conform import conform

IDLE_SECONDS = 2.5


class CountingSelector(selectors.DefaultSelector):
    """The platform's selector, counting its returns: each one is a wakeup of the loop."""

    def __init__(self) -> None:
        super().__init__()
        self.returns = 0

    def select(self, timeout: float | None = None) -> Any:
        ready = super().select(timeout)
        self.returns += 1
        return ready


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def _date_of_an_answer(port: int) -> float:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        await writer.drain()
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).decode("latin-1")
    finally:
        writer.close()
    assert head.startswith("HTTP/1.1 200"), head
    dates = [line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.lower().startswith("date:")]
    assert len(dates) == 1, head
    return email.utils.parsedate_to_datetime(dates[0]).timestamp()


async def _serve_idle_then_answer(selector: CountingSelector) -> tuple[int, float, float, bool]:
    sock = bind_socket("127.0.0.1", 0)
    server = http_server(_ok, conform(HttpConfig, {}), websockets=False)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 (uvicorn's ``started`` is a plain flag)
        await asyncio.sleep(0.01)
    before = selector.returns
    await asyncio.sleep(IDLE_SECONDS)  # one timer of the test's own: one return at its end
    woken = selector.returns - before
    port = sock.getsockname()[1]
    dated = await _date_of_an_answer(port)
    asked = time.time()
    server.request_exit()
    await asyncio.wait_for(task, 10)
    stopped = task.done() and task.exception() is None
    return woken, dated, asked, stopped


def test_an_idle_server_sleeps_until_asked_and_dates_the_answer_now() -> None:
    selector = CountingSelector()
    loop = asyncio.SelectorEventLoop(selector)
    try:
        woken, dated, asked, stopped = loop.run_until_complete(_serve_idle_then_answer(selector))
    finally:
        loop.close()
    # The test's own sleep returns the selector once (twice if the kernel wakes it a hair
    # early); a tick of once a second would add two more in 2.5 s, uvicorn's own about 25.
    assert woken <= 2, f"the loop woke {woken} times in {IDLE_SECONDS} s of an idle server"
    # The Date header is to the second, taken when the answer was made (just before ``asked``).
    assert asked - 2 <= dated <= asked, (dated, asked)
    assert stopped, "request_exit did not stop the server"
