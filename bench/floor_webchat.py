#!/usr/bin/env python
"""The web chat's floor: a bare Starlette WebSocket echo on uvicorn, the libraries chatgate uses.

It speaks just enough of the web chat protocol for ``bench/e2e_clients.py`` to drive it
unchanged: ``hello`` → ``ready``; ``message`` → ``ack`` then ``final`` with a fresh
``message_id`` and the text ``echo: <text>``; ``received`` is ignored. No store, no
session, no agent: what is left is the cost of the ASGI server, the WebSocket and JSON,
i.e. the least any gateway on these libraries can spend per message.

Configured like chatgate's server (``app/gateway.py``): uvicorn with ``lifespan`` off, no
log config, the same ``ws_max_size`` and ping interval, and an explicitly created TCP
socket, so asyncio sets ``TCP_NODELAY`` on accepted connections as it does for chatgate.
Prints ``floor is running: open http://HOST:PORT/`` once it listens; SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import signal
import socket
from collections.abc import Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

_ids = itertools.count(1)


async def echo(ws: WebSocket) -> None:
    await ws.accept()
    try:
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            frame = json.loads(message.get("text") or message.get("bytes") or b"{}")
            kind = frame.get("type")
            if kind == "hello":
                await ws.send_text(json.dumps({"type": "ready"}))
            elif kind == "message":
                ident = frame.get("id")
                await ws.send_text(json.dumps({"type": "ack", "id": ident, "duplicate": False}))
                final = {
                    "type": "final",
                    "message_id": f"f{next(_ids)}",
                    "in_reply_to": ident,
                    "text": f"echo: {frame.get('text', '')}",
                }
                await ws.send_text(json.dumps(final))
    except WebSocketDisconnect:
        return


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # SIGTERM is handled in serve(): exit 0
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        host, port = sockets[0].getsockname()[:2] if sockets else ("?", 0)
        print(f"floor is running: open http://{host}:{port}/", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args()
    # TCP-typed (IPPROTO_TCP), as chatgate's listener: asyncio then sets TCP_NODELAY on accept.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(512)
    sock.setblocking(False)
    app = Starlette(routes=[WebSocketRoute("/ws", echo)])
    config = uvicorn.Config(
        app, log_config=None, lifespan="off", ws_max_size=4 * 1024 * 1024, ws_ping_interval=20.0
    )
    asyncio.run(serve(_Server(config), sock))


async def serve(server: _Server, sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    main()
