"""Relayed files reach the agent as the connector contract carries them (``media_urls`` with
``media[]`` metadata): an http(s) URL fetched by the gateway (public addresses only unless
``allow_private_urls``), or the bytes inline as a ``data:`` URL. Through relaysim and the
real gateway with the echo agent, which names each file it received."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatgate.domain.media import human_size
from support.file_server import FileHandler, file_server
from support.media_files import png
from support.procs import GatewayProcess
from support.relay_harness import GW, SECRET, RelayWorld

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


async def test_the_notice_of_a_file_not_received_comes_before_the_answer_starts(
    world: RelayWorld, files: Any
) -> None:
    """The notice is recorded before the agent runs and the answer's previews wait for it: with
    an answer that streams for seconds, the chat reads the notice, then the answer's preview and
    its edits, never the preview first (the notice used to be committed with the turn, after
    every preview)."""
    base, _ = files
    world.agent = None
    world.extra["agent"] = {"echo": {"chunk_delay_ms": 60, "chunk_chars": 3}}
    await world.start()
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_inbound(GW, event("look", "m3", [f"{base}/shot.png"], ["shot.png"]))
    await world.wait_for(
        lambda: any(not str(o.get("content", "")).endswith("▍") for o in world.ops("edit")), "the final edit"
    )
    shown = [(o.op, str(o.action.get("content", ""))) for o in world.sim.ops(GW) if o.op in ("send", "edit")]
    assert shown[0][0] == "send" and shown[0][1].startswith("[attachment shot.png was not received"), shown
    answer = [content for _, content in shown[1:]]
    assert answer and all(c.startswith("echo: look") for c in answer), shown
    assert any(c.endswith("▍") for c in answer), f"no preview before the final: {shown}"


@pytest.mark.slow
@pytest.mark.timeout(200)  # two starts of a real gateway process
async def test_a_kill_mid_download_fetches_again_and_answers_once(
    world: RelayWorld, files: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, handler = files
    image = png(300, 200)
    handler.files["/slow.png"] = image
    handler.stall.add("/slow.png")
    monkeypatch.setenv("RELAY_TEST_SECRET", SECRET)
    relay = {
        "enabled": True,
        "url": world.sim.base_url,
        "gateway_id": GW,
        "secret_env": "RELAY_TEST_SECRET",
        "platforms": [{"platform": "discord", "bot_id": "bot1", "allow_all": True}],
        "reconnect_initial_seconds": 0.05,
        "reconnect_max_seconds": 0.5,
        "allow_private_urls": True,
    }
    config = {
        "agent": {"echo": {"chunk_delay_ms": 0}},
        "platforms": {"web": {"enabled": False}, "relay": relay},
        "locks": {"credential_dir": str(tmp_path / "locks")},
    }
    gateway = GatewayProcess(tmp_path, config)
    await gateway.start()
    try:
        await world.sim.wait_connected(GW, 30)
        await world.sim.inject_inbound(GW, event("keep this", "m3", [f"{base}/slow.png"], ["slow.png"]))
        await world.wait_for(lambda: handler.requests == ["/slow.png"], "the download to start", 90)
        await gateway.kill()
        handler.release.set()
        await gateway.start()
        await world.wait_for(lambda: _answered(world), "the answer", 90)
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
    assert _answered(world) == [f"echo: keep this\nreceived slow.png (image/png, {human_size(len(image))})"]
    assert handler.requests == ["/slow.png", "/slow.png"]  # fetched again after the kill
    assert os.listdir(tmp_path / "state" / "blobs" / "tmp") == []  # the killed download's part is gone


def _answered(world: RelayWorld) -> list[str]:
    """The answers sent (the restart's notice aside)."""
    return [str(op["content"]) for op in world.ops("send") if str(op["content"]).startswith("echo:")]
