"""The re-host client (``platforms/relay/rehost.py``) against relaysim's ``POST /relay/media``:
the body streamed with its length known, the URL it answers serving the same bytes; a connector
that refuses the file by its headers answers before any of the body is read (``100-continue``);
the refusals that end the row and the failures that are retried; ``media_kind`` by MIME type."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chatgate.domain.media import BlobStream, FileBody
from chatgate.domain.outfiles import OutFile
from chatgate.platforms.relay.platform import media_kind
from chatgate.platforms.relay.rehost import RehostFailed, RehostRefused, media_url, rehost
from relaysim import RelaySimulator

GW, SECRET = "gw-rehost", "rehost-secret"
PIECE = 1 << 20


class Body:
    """A ``FileBody`` over bytes that counts how many times its pieces were read."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.reads = 0

    def file_body(self) -> FileBody:
        return FileBody(self._stream(), self._reopen)

    def _stream(self) -> BlobStream:
        return BlobStream(len(self.data), self._pieces())

    async def _reopen(self) -> BlobStream | None:
        return self._stream()

    async def _pieces(self) -> AsyncIterator[bytes]:
        self.reads += 1
        for start in range(0, len(self.data), PIECE):
            yield self.data[start : start + PIECE]


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[RelaySimulator]:
    simulator = RelaySimulator(tmp_path / "relay.db", {GW: [SECRET]}, [{"platform": "discord"}])
    await simulator.start()
    try:
        yield simulator
    finally:
        await simulator.stop()


def out_file(data: bytes, name: str = "blob.bin", mime: str = "application/octet-stream") -> OutFile:
    return OutFile(sha="0" * 64, name=name, mime=mime, size=len(data))


async def test_the_body_streams_and_the_url_serves_the_same_bytes(sim: RelaySimulator) -> None:
    data = bytes(range(256)) * 12_000  # about 3 MB: several pieces
    body = Body(data)
    url = await rehost(sim.relay_url, GW, SECRET, out_file(data, "r é.bin"), body.file_body())
    hosted = sim.media.fetch(url)
    assert hosted is not None and (hosted.name, hosted.gateway_id) == ("r é.bin", GW)
    assert hosted.data == data
    served = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read())
    assert served == data and body.reads == 1


async def test_a_lower_cap_refuses_the_file_before_any_of_the_body_is_sent(sim: RelaySimulator) -> None:
    sim.media.cap_bytes = PIECE
    body = Body(b"y" * (3 * PIECE))
    with pytest.raises(RehostRefused, match="HTTP 413"):
        await rehost(sim.relay_url, GW, SECRET, out_file(body.data), body.file_body())
    assert body.reads == 0 and sim.media.hosted == {} and sim.media.uploads_seen == 1


RETRIED_OR_REFUSED = [(500, RehostFailed), (503, RehostFailed), (415, RehostRefused)]


@pytest.mark.parametrize(("status", "outcome"), RETRIED_OR_REFUSED)
async def test_the_connector_s_answer_decides_retry_or_refusal(
    sim: RelaySimulator, status: int, outcome: type[Exception]
) -> None:
    sim.media.refusal = status
    with pytest.raises(outcome, match=f"HTTP {status}"):
        await rehost(sim.relay_url, GW, SECRET, out_file(b"z"), Body(b"z").file_body())


async def test_a_wrong_secret_and_an_unreachable_connector_are_retried(sim: RelaySimulator) -> None:
    with pytest.raises(RehostFailed, match="HTTP 401"):
        await rehost(sim.relay_url, GW, "not-the-secret", out_file(b"z"), Body(b"z").file_body())
    with pytest.raises(RehostFailed, match="re-host failed"):
        await rehost("ws://127.0.0.1:1/relay", GW, SECRET, out_file(b"z"), Body(b"z").file_body())
    assert sim.media.hosted == {}


def test_the_endpoint_is_the_connector_s_http_side() -> None:
    assert media_url("wss://relay.example/relay") == "https://relay.example/relay/media"
    assert media_url("ws://127.0.0.1:8787/relay/") == "http://127.0.0.1:8787/relay/media"
    assert media_url("https://relay.example") == "https://relay.example/relay/media"


@pytest.mark.parametrize(
    ("mime", "kind"),
    [
        ("image/png", "image"),
        ("audio/ogg", "voice"),
        ("audio/mpeg", "audio"),
        ("video/mp4", "video"),
        ("application/pdf", "document"),
        ("text/plain", "document"),
    ],
)
def test_media_kind_by_mime_type(mime: str, kind: str) -> None:
    assert media_kind(mime) == kind
