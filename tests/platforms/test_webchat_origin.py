"""A page on another site must not drive the gateway's web chat (and, with tools on, its shell)."""

from __future__ import annotations

import pytest
import websockets
from websockets.exceptions import InvalidStatus

from support.web_harness import StartGateway, WebClient, web_config


async def _open(port: int, origin: str | None) -> websockets.asyncio.client.ClientConnection:
    return await websockets.asyncio.client.connect(f"ws://127.0.0.1:{port}/ws", origin=origin, proxy=None)  # type: ignore[arg-type]


async def test_a_cross_origin_socket_is_refused_and_same_origin_or_no_origin_is_served(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(
        web_config(platforms={"web": {"allowed_origins": ["https://chat.example/"]}})
    )
    assert gateway.port
    with pytest.raises(InvalidStatus) as refused:
        await _open(gateway.port, "http://evil.example")
    assert refused.value.response.status_code == 403
    for origin in (f"http://127.0.0.1:{gateway.port}", None, "https://chat.example"):
        ws = await _open(gateway.port, origin)
        client = WebClient(ws)
        await client.hello(f"chat-{origin}")
        frames = await client.ask("m-" + str(origin), "hi")
        assert frames[-1]["type"] == "final"
        await client.close()


async def _open_as(name: str, port: int) -> websockets.asyncio.client.ClientConnection:
    """A browser on a page of ``name`` opening its own /ws, with ``name`` resolving to 127.0.0.1."""
    return await websockets.asyncio.client.connect(
        f"ws://{name}:{port}/ws",
        origin=f"http://{name}:{port}",  # type: ignore[arg-type]
        host="127.0.0.1",
        port=port,
        proxy=None,
    )


async def test_dns_rebinding_to_a_loopback_gateway_is_refused(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    assert gateway.port
    with pytest.raises(InvalidStatus) as refused:
        await _open_as("attacker.example", gateway.port)  # same-origin by the headers, not by the name
    assert refused.value.response.status_code == 403
    ws = await _open_as("localhost", gateway.port)  # a loopback name is the gateway's own page
    await ws.close()
