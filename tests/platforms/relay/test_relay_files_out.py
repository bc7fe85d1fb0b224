"""The agent's files go out through the relay: ``attach_file`` (the echo agent's ``!attach``) in a
real gateway, re-hosted by the connector (``POST /relay/media``, streamed) and posted with the
contract's ``send_media`` op, against relaysim. A connector that does not list the op gets the
clear refusal line instead; a re-host that fails is retried and the file still posted once; one
that refuses the file (413) fails its row with the reason, once, and posts nothing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from relaysim import RelaySimulator
from support.media_files import pdf, png
from support.relay_harness import GW, SECRET, RelayWorld

CHANNEL = "931"
OPS = ["send", "edit", "typing", "follow_up", "send_media"]


def event(text: str, message_id: str) -> dict[str, Any]:
    source = {"platform": "discord", "chat_id": CHANNEL, "chat_type": "dm", "user_id": "u1"}
    return {"text": text, "message_id": message_id, "source": source}


@contextlib.asynccontextmanager
async def _world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ops: list[str] | None
) -> AsyncIterator[RelayWorld]:
    for name in list(os.environ):
        if name.startswith("CHATGATE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CHATGATE_TEST_RELAY_SECRET", SECRET)
    descriptor: dict[str, Any] = {"platform": "discord", **({"supported_ops": ops} if ops else {})}
    sim = RelaySimulator(tmp_path / "relay.db", {GW: [SECRET]}, [descriptor], ack_timeout=2.0)
    await sim.start()
    world = RelayWorld(tmp_path, sim)
    work = tmp_path / "work"
    work.mkdir()
    world.agent = None  # the config's echo agent: !attach
    world.extra = {"tools": {"enabled": True, "workdir": str(work)}}
    try:
        yield world
    finally:
        await world.stop()
        await sim.stop()


@pytest.fixture
async def media_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RelayWorld]:
    async with _world(tmp_path, monkeypatch, OPS) as world:
        yield world


@pytest.fixture
async def legacy_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RelayWorld]:
    async with _world(tmp_path, monkeypatch, None) as world:
        yield world


async def test_files_are_re_hosted_then_posted_with_send_media(media_world: RelayWorld) -> None:
    world = media_world
    image, report = png(64, 48, (0, 128, 255)), pdf("quarterly figures")
    (world.tmp / "work" / "chart.png").write_bytes(image)
    (world.tmp / "work" / "report.pdf").write_bytes(report)
    await world.start()
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_inbound(GW, event("!attach chart.png | the chart\n!attach report.pdf", "m1"))
    chart, doc = await world.wait_ops("send_media", 2)
    assert (chart["media_kind"], chart["caption"]) == ("image", "the chart")
    assert (doc["media_kind"], doc["caption"]) == ("document", "")
    assert "filename" not in chart  # only the contract's fields: the re-host carries the name
    assert chart["chat_id"] == CHANNEL and chart["reply_to"] == "m1"
    hosted = world.sim.media.fetch(chart["source_url"]), world.sim.media.fetch(doc["source_url"])
    assert [(h.data, h.mime, h.name, h.gateway_id) for h in hosted if h is not None] == [
        (image, "image/png", "chart.png", GW),
        (report, "application/pdf", "report.pdf", GW),
    ]
    assert len(world.sim.media.hosted) == 2  # each re-hosted once
    fetched = await asyncio.to_thread(lambda: urllib.request.urlopen(chart["source_url"], timeout=10).read())
    assert fetched == image  # what the connector fetches by source_url
    sent = [m for m in world.sim.messages(GW) if m.op == "send_media"]
    assert [(m.media_kind, m.content) for m in sent] == [("image", "the chart"), ("document", "")]


@pytest.mark.parametrize("status", [500, 503])
async def test_a_failed_re_host_is_retried_and_the_file_posted_once(
    media_world: RelayWorld, status: int
) -> None:
    world = media_world
    image = png(20, 20, (1, 2, 3))
    (world.tmp / "work" / "a.png").write_bytes(image)
    world.sim.media.refusal = status  # the connector's re-host is broken, or down
    await world.start()
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_inbound(GW, event("!attach a.png", "m2"))
    await world.wait_for(
        lambda: world.query("SELECT attempts FROM outbox WHERE idem_key LIKE 'file:%' AND attempts > 0"),
        "a failed re-host attempt",
    )
    assert world.ops("send_media") == []  # nothing is posted while the re-host fails
    world.sim.media.refusal = None
    (posted,) = await world.wait_ops("send_media", 1)
    assert world.sim.media.fetch(posted["source_url"]).data == image  # type: ignore[union-attr]
    await world.wait_for(
        lambda: world.query("SELECT 1 FROM outbox WHERE idem_key LIKE 'file:%' AND status = 'sent'"), "sent"
    )
    assert len(world.ops("send_media")) == 1


async def test_a_connector_without_send_media_gets_the_refusal_line(legacy_world: RelayWorld) -> None:
    world = legacy_world
    (world.tmp / "work" / "a.png").write_bytes(png())
    await world.start()
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_inbound(GW, event("!attach a.png", "m3"))
    sends = await world.wait_ops("send", 2)
    assert "could not be sent: this chat does not take files from the gateway" in sends[-1]["content"]
    assert world.ops("send_media") == [] and world.sim.media.hosted == {}


async def test_a_re_host_that_refuses_the_file_fails_its_row_once(media_world: RelayWorld) -> None:
    world = media_world
    (world.tmp / "work" / "big.bin").write_bytes(os.urandom(3 * 2**20))
    world.sim.media.cap_bytes = 2**20  # a connector with a lower cap than the contract's 25 MB
    await world.start()
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_inbound(GW, event("!attach big.bin | the data", "m4"))
    failed_row = "SELECT last_error FROM outbox WHERE idem_key LIKE 'file:%' AND status = 'failed'"
    (failed,) = await world.wait_for(lambda: world.query(failed_row), "the file row failed")
    assert "larger than its re-host takes (HTTP 413)" in failed[0]
    assert world.sim.media.uploads_seen == 1 and world.sim.media.hosted == {}  # not retried
    assert world.ops("send_media") == []


async def test_a_send_media_without_an_answer_is_sent_again_marked(media_world: RelayWorld) -> None:
    world = media_world
    world.extra["delivery"] = {"duplicate_marker": "(possible repeat) "}
    (world.tmp / "work" / "a.png").write_bytes(png(8, 8, (9, 9, 9)))
    world.sim.media.stall_uploads = 1  # holds the file while the reply's text is answered
    await world.start(outbound_timeout_seconds=0.5)
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_inbound(GW, event("!attach a.png | once", "m5"))
    await world.wait_for(lambda: world.sim.media.uploads_seen == 1, "the re-host")
    world.sim.set_result_policy(GW, "never")  # the connector takes the op and never answers
    world.sim.media.release()
    await world.wait_ops("send_media", 1)
    world.sim.set_result_policy(GW, "ok")
    first, again = await world.wait_ops("send_media", 2)
    assert (first["caption"], again["caption"]) == ("once", "(possible repeat) once")
    assert first["source_url"] != again["source_url"]  # a fresh re-host for the resend
    await world.wait_for(
        lambda: world.query("SELECT 1 FROM outbox WHERE idem_key LIKE 'file:%' AND status = 'sent'"), "sent"
    )
    assert len(world.ops("send_media")) == 2
