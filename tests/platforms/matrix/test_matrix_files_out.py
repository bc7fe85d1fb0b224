"""The agent's files reach a Matrix room: ``attach_file`` (the echo agent's ``!attach``) through a
real in-process gateway to a real Synapse. Each file is uploaded to the homeserver's media
repository (streamed from the blob store) and posted as an ``m.image`` or ``m.file`` event in the
reply's place; a reader downloads the same bytes. A second delivery of the same outbox row (what a
crash after the send makes) is answered by the homeserver with the event already posted, under the
row's transaction id: the room shows the file once.

The test homeserver takes uploads up to 4 MiB (``homeserver.py``); the adapter reads that limit
when it signs in, so a file over it is the refusal line in the chat, and an upload the homeserver
still refuses (a limit lowered since) fails the row with a reason naming the file's size."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from chatgate.domain.media import BlobStream, FileBody
from chatgate.domain.outbound import Delivered, Rejected
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.outfiles import OutFile
from matrix.conftest import Gateways
from matrix.harness import People, joined, matrix_config, wait_for
from support.media_files import pdf, png

pytestmark = pytest.mark.slow
HOMESERVER_LIMIT = 4 * 1024 * 1024
"""``max_upload_size: 4M`` in ``homeserver.py``."""


def files_by(events: list[dict[str, Any]], sender: str) -> list[dict[str, Any]]:
    return [
        e["content"]
        for e in events
        if e.get("sender") == sender
        and e.get("type") == "m.room.message"
        and (e.get("content") or {}).get("msgtype") in ("m.image", "m.file")
    ]


async def download(people: People, token: str, mxc: str) -> bytes:
    server, media_id = mxc.removeprefix("mxc://").split("/", 1)
    url = f"{people.server.base}/_matrix/client/v1/media/download/{quote(server)}/{quote(media_id)}"
    async with people.http.get(url, headers={"Authorization": f"Bearer {token}"}) as response:
        assert response.status == 200, await response.text()
        return await response.read()


def file_row(state: Path) -> OutboxRow:
    db = sqlite3.connect(state / "chatgate.db", timeout=30)
    try:
        found = db.execute(
            "SELECT id, idem_key, platform, chat_id, session_key, kind, text, in_reply_to, target_json,"
            " created_at FROM outbox WHERE idem_key LIKE 'file:%' ORDER BY id LIMIT 1"
        ).fetchone()
    finally:
        db.close()
    ident, key, platform, chat, session, kind, text, reply_to, target, created = found
    return OutboxRow(
        ident, key, platform, chat, session, kind, text, reply_to, "sending", 1, True, None, created,
        json.loads(target),
    )  # fmt: skip


async def test_an_attached_image_and_a_pdf_are_posted_once_with_their_bytes(
    people: People, gateways: Gateways, tmp_path: Path
) -> None:
    bot, ann = people.account("bot"), people.person("ann")
    work = tmp_path / "work"
    work.mkdir()
    image, report = png(64, 48, (0, 128, 255)), pdf("quarterly figures")
    (work / "chart.png").write_bytes(image)
    (work / "report.pdf").write_bytes(report)
    config = matrix_config(people.server, bot, tmp_path, tools={"enabled": True, "workdir": str(work)})
    gateway = await gateways.start(config, bot)
    room = await ann.create_room(invite=[bot.user_id], direct=True)
    await joined(ann, room, bot.user_id)
    await ann.send(room, {"msgtype": "m.text", "body": "!attach chart.png | the chart\n!attach report.pdf"})

    async def both() -> list[dict[str, Any]] | None:
        found = files_by(await ann.events(room), bot.user_id)
        return found if len(found) == 2 else None

    picture, document = await wait_for(both, 60, "both files")
    assert (picture["msgtype"], picture["body"], picture["filename"]) == ("m.image", "the chart", "chart.png")
    assert picture["info"] == {"mimetype": "image/png", "size": len(image), "w": 64, "h": 48}
    assert (document["msgtype"], document["body"], document["filename"]) == (
        "m.file",
        "report.pdf",
        "report.pdf",
    )
    assert await download(people, ann.account.token, picture["url"]) == image
    assert await download(people, ann.account.token, document["url"]) == report

    row = file_row(tmp_path / "state")  # the image's row, delivered again as after a crash
    file = OutFile.from_target(row.target, row.text)
    assert file is not None
    adapter, media = gateway.adapters["matrix"], gateway.engine.media
    first = await media.open_blob(file.sha)
    assert first is not None
    body = FileBody(first, lambda: media.open_blob(file.sha))
    try:
        again = await adapter.send_file(row, file, body, "(possible repeat) the chart")
    finally:
        await body.close()
    images = [c for c in files_by(await ann.events(room), bot.user_id) if c["msgtype"] == "m.image"]
    assert len(images) == 1, images  # the homeserver answered the resend with the first event
    events = await ann.events(room)
    posted = [e["event_id"] for e in events if e.get("content", {}).get("filename") == "chart.png"]
    assert again == Delivered(posted[0])


def body_of(data: bytes) -> FileBody:
    """A file body held in memory (the blob store's stream, without a store)."""

    async def pieces() -> AsyncIterator[bytes]:
        for at in range(0, len(data), 1 << 20):
            yield data[at : at + (1 << 20)]

    async def reopen() -> BlobStream:
        return BlobStream(len(data), pieces())

    return FileBody(BlobStream(len(data), pieces()), reopen)


async def test_the_homeservers_upload_limit_is_taken_and_a_file_over_it_is_refused_naming_its_size(
    people: People, gateways: Gateways, tmp_path: Path
) -> None:
    bot, ann = people.account("bot"), people.person("ann")
    work = tmp_path / "work"
    work.mkdir()
    big = os.urandom(5_000_000)
    (work / "big.bin").write_bytes(big)
    config = matrix_config(people.server, bot, tmp_path, tools={"enabled": True, "workdir": str(work)})
    gateway = await gateways.start(config, bot)
    adapter = gateway.adapters["matrix"]

    def limit_taken() -> bool:
        return bool(adapter.capabilities.max_upload_bytes == HOMESERVER_LIMIT)

    await wait_for(limit_taken, 30, "the homeserver's limit taken at sign-in")
    room = await ann.create_room(invite=[bot.user_id], direct=True)
    await joined(ann, room, bot.user_id)
    await ann.send(room, {"msgtype": "m.text", "body": "!attach big.bin"})

    async def refusal() -> str | None:
        for event in await ann.events(room):
            body = (event.get("content") or {}).get("body", "")
            if event.get("sender") == bot.user_id and "could not be sent" in body:
                return str(body)
        return None

    line = await wait_for(refusal, 60, "the refusal line")
    assert line == (
        "[file big.bin (5.0 MB) could not be sent: it is larger than the 4.2 MB Matrix takes from a bot]"
    )
    assert files_by(await ann.events(room), bot.user_id) == []

    # An upload the homeserver refuses all the same (its limit lowered since the sign-in): 413.
    row = OutboxRow(
        999, "file:1:0", "matrix", room, "s", "final", "", None, "sending", 1, False, None, time.time(), {},
    )  # fmt: skip
    file = OutFile("0" * 64, "big.bin", "application/octet-stream", len(big))
    result = await adapter.send_file(row, file, body_of(big), "")
    assert isinstance(result, Rejected), result
    assert result.reason.startswith("big.bin (5.0 MB) is larger than the homeserver takes: "), result.reason
    assert "HTTP 413 M_TOO_LARGE" in result.reason
    assert files_by(await ann.events(room), bot.user_id) == []
