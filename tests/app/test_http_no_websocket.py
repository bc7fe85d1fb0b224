"""A gateway whose platforms brought no WebSocket route serves none (issue 33: uvicorn then
loads no WebSocket protocol, about 1 MB), and refuses an upgrade request quietly.

uvicorn without a WebSocket protocol warns of every upgrade request and advises installing a
WebSocket library; any stranger could write that warning, and it would become ``/status``'s
last error. Real in-process gateways on 127.0.0.1, raw sockets.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx

from support.web_harness import _no_chatgate_env, start_gateway, web_config

__all__ = ["_no_chatgate_env", "start_gateway"]  # the fixtures

UPGRADE = (
    "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
    "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
)


async def _status_line(port: int, path: str) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(UPGRADE.format(path=path).encode())
        await writer.drain()
        return (await asyncio.wait_for(reader.readline(), 10)).decode().strip()
    finally:
        writer.close()


async def test_without_a_websocket_route_an_upgrade_is_a_quiet_404(start_gateway: Any, caplog: Any) -> None:
    caplog.set_level(logging.INFO)
    gateway = await start_gateway(web_config(platforms={"web": {"enabled": False}}))
    for _ in range(3):
        assert await _status_line(gateway.port, "/ws") == "HTTP/1.1 404 Not Found"
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}") as client:
        assert (await client.get("/healthz")).status_code == 200
        status = (await client.get("/status")).json()
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned == [], warned
    assert "WebSocket" not in str(status), status
    logging.getLogger("uvicorn.error").warning("a warning of uvicorn's own still shows")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "a warning of uvicorn's own still shows"
    ]


async def test_with_the_web_chat_its_socket_still_upgrades(start_gateway: Any) -> None:
    gateway = await start_gateway(web_config())
    assert await _status_line(gateway.port, "/ws") == "HTTP/1.1 101 Switching Protocols"
