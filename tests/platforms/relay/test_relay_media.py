"""Relayed files reach the agent as the connector contract carries them (``media_urls`` with
``media[]`` metadata): an http(s) URL fetched by the gateway (public addresses only unless
``allow_private_urls``), or the bytes inline as a ``data:`` URL. Through relaysim and the
real gateway with the echo agent, which names each file it received."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from chatgate.domain.media import human_size
from support.file_server import FileHandler, file_server
from support.media_files import png
from support.relay_harness import GW, RelayWorld

CHANNEL = "901"


@pytest.fixture
def files() -> Iterator[tuple[str, type[FileHandler]]]:
    with file_server() as served:
        yield served


def event(text: str, message_id: str, urls: list[str], names: list[str]) -> dict[str, Any]:
    source = {"platform": "discord", "chat_id": CHANNEL, "chat_type": "dm", "user_id": "u1"}
    media = [
        {"url": u, "kind": "photo", "mime": "image/png", "filename": n}
        for u, n in zip(urls, names, strict=True)
    ]
    return {"text": text, "message_id": message_id, "source": source, "media_urls": urls, "media": media}


async def _replies(world: RelayWorld, count: int) -> list[str]:
    return [str(op["content"]) for op in await world.wait_ops("send", count)]


async def test_a_url_and_inline_bytes_both_reach_the_agent(world: RelayWorld, files: Any) -> None:
    base, handler = files
    fetched, inline = png(30, 20, (9, 9, 9)), png(10, 10, (200, 200, 0))
    handler.files["/shot.png"] = fetched
    world.agent = None  # the config's echo agent names what it received
    await world.start(allow_private_urls=True)
    await world.sim.wait_connected(GW, 10)
    data = f"data:image/png;base64,{base64.b64encode(inline).decode()}"
    await world.sim.inject_inbound(GW, event("two", "m1", [f"{base}/moved", data], ["cdn.png", "inline.png"]))
    (reply,) = await _replies(world, 1)
    assert reply == (
        "echo: two\n"
        f"received cdn.png (image/png, {human_size(len(fetched))})\n"
        f"received inline.png (image/png, {human_size(len(inline))})"
    )
    assert handler.requests == ["/moved", "/shot.png"]


async def test_a_url_on_a_private_address_is_not_fetched_by_default(world: RelayWorld, files: Any) -> None:
    base, handler = files
    handler.files["/shot.png"] = png()
    world.agent = None
    await world.start()
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_inbound(GW, event("look", "m2", [f"{base}/shot.png"], ["shot.png"]))
    notice, reply = await _replies(world, 2)
    assert notice.startswith("[attachment shot.png was not received: the host 127.0.0.1 is a private"), notice
    assert reply.startswith("echo: look")
    assert handler.requests == []
