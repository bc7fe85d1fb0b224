"""The agent's files reach a Matrix room: ``attach_file`` (the echo agent's ``!attach``) through a
real in-process gateway to a real Synapse. Each file is uploaded to the homeserver's media
repository (streamed from the blob store) and posted as an ``m.image`` or ``m.file`` event in the
reply's place; a reader downloads the same bytes. A second delivery of the same outbox row (what a
crash after the send makes) is answered by the homeserver with the event already posted, under the
row's transaction id: the room shows the file once."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from chatgate.domain.media import FileBody
from chatgate.domain.outbound import Delivered
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.outfiles import OutFile
from matrix.conftest import Gateways
from matrix.harness import People, joined, matrix_config, wait_for
from support.media_files import pdf, png

pytestmark = pytest.mark.slow


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
    assert picture["info"] == {"mimetype": "image/png", "size": len(image)}
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
