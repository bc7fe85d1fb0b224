"""What a web chat socket must do to be let in and to stay: the session cookie at the handshake
(accounts), then an accepted hello within ``http.auth_timeout_seconds``.

A socket that never says hello is a place a stranger holds for nothing (1,000 of them filled
the server, issue 27): past the deadline it is closed with 4408 and a reason the page can
show. A refused handshake is told with a close code the page acts on (4401: sign in).
"""

from __future__ import annotations

import asyncio

from starlette.types import Message
from starlette.websockets import WebSocket

from chatgate.domain.log_budget import LogBudget
from chatgate.platforms.webchat.connection import NO_HELLO, SIGNED_OUT, Connection
from chatgate.platforms.webchat.session_gate import Refusal, SessionGate


async def refuse(ws: WebSocket, refusal: Refusal, gate: SessionGate) -> None:
    """A foreign Origin is refused at the handshake; a missing or ended session is told
    with a close code the page acts on (4401: go to the sign-in page)."""
    gate.refused(ws, refusal, "socket")
    if refusal.status == 403:
        await ws.close(code=1008, reason=refusal.message)
        return
    await ws.accept()
    await ws.close(code=SIGNED_OUT if refusal.status == 401 else 1011, reason=refusal.message[:120])


async def next_message(
    ws: WebSocket, conn: Connection, hello_by: float, timeout: float, lines: LogBudget
) -> Message | None:
    """The socket's next message; None (the socket is closing with 4408) past the hello deadline."""
    if conn.greeted:
        return await ws.receive()
    try:
        async with asyncio.timeout_at(hello_by):
            return await ws.receive()
    except TimeoutError:
        lines.info(
            "web: no hello",
            "closed a web chat socket that sent no accepted hello within %.0f s (http.auth_timeout_seconds)",
            timeout,
        )
        conn.close_with(NO_HELLO, f"send a hello within {timeout:.0f} s of connecting")
        return None
