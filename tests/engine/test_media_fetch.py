"""The durable fetch step with the real engine and store: a turn's files are fetched once,
before the agent is asked; a failure is a note to the agent and a line the user sees; a
re-run turn reads the recorded outcome instead of fetching again; the history keeps the files."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from chatgate.domain.inbound import Attachment, Inbound
from chatgate.domain.media import MediaLimits, MediaRefused
from chatgate.domain.turns import QueuedItem
from chatgate.engine.pipeline import MediaSettings
from support.engine_harness import RecordingAdapter
from support.media_files import pdf, png


class FileAdapter(RecordingAdapter):
    """The platform, with files to serve by ref (in 16 kB pieces, like a network read)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        super().__init__()
        self.files = files
        self.opened: list[str] = []
        self.gate: asyncio.Event | None = None

    async def open_attachment(self, attachment: Attachment) -> AsyncIterator[bytes]:
        self.opened.append(attachment.ref)
        if attachment.ref not in self.files:
            raise MediaRefused("the platform no longer has this file")
        data = self.files[attachment.ref]
        for start in range(0, len(data), 16_384):
            if self.gate is not None:
                await self.gate.wait()
            yield data[start : start + 16_384]


def settings(tmp_path: Path, **limits: Any) -> MediaSettings:
    return MediaSettings(MediaLimits(**limits), tmp_path / "blobs" / "tmp")


def with_files(inbound: Inbound, *attachments: Attachment) -> Inbound:
    return replace(inbound, attachments=attachments)


async def test_a_photo_reaches_the_agent_once_and_stays_in_the_history(make_harness, tmp_path):
    image = png(64, 48)
    adapter = FileAdapter({"f1": image})
    h = await make_harness(adapter=adapter, media=settings(tmp_path))
    photo = Attachment("photo", "f1", "image/jpeg", None, len(image))
    await h.admission.admit(with_files(h.inbound("look at this", chat_id="c1"), photo))
    (final,) = await h.finals("c1", 1)
    assert "received photo.jpg (image/png, " in final  # the type is the content's, not the platform's
    (request,) = h.agent.requests()
    (item,) = request.turn_media
    assert item.mime == "image/png" and item.size == len(image)
    assert request.media[item.sha].data == image
    assert "[attached: photo.jpg (image/png" in request.model_input

    await h.send("and now?", chat_id="c1")
    await h.finals("c1", 2)
    later = h.agent.requests()[-1]
    assert [e.media for e in later.history if e.media] == [(item,)]
    assert later.media[item.sha].data == image  # read back from the blob store, not fetched again
    assert adapter.opened == ["f1"]


async def test_a_pdf_reaches_the_agent_as_its_text(make_harness, tmp_path):
    adapter = FileAdapter({"p1": pdf("Quarterly revenue rose by 12 percent")})
    h = await make_harness(adapter=adapter, media=settings(tmp_path))
    doc = Attachment("document", "p1", "application/pdf", "../../etc/report.pdf", None)
    await h.admission.admit(with_files(h.inbound("", chat_id="c1"), doc))
    await h.finals("c1", 1)
    (request,) = h.agent.requests()
    (item,) = request.turn_media
    assert item.name == "report.pdf"
    assert request.media[item.sha].text == "Quarterly revenue rose by 12 percent"


async def test_a_failed_file_is_a_note_and_a_line_and_the_message_is_answered(make_harness, tmp_path):
    adapter = FileAdapter({"big": b"x" * 300_000, "ok": b"plain text notes\n"})
    h = await make_harness(adapter=adapter, media=settings(tmp_path, max_bytes=100_000))
    files = (
        Attachment("document", "big", None, "huge.bin", None),
        Attachment("document", "gone", None, "old.pdf", None),
        Attachment("document", "ok", None, "notes.txt", None),
    )
    await h.admission.admit(with_files(h.inbound("three files", chat_id="c1"), *files))
    (final,) = await h.finals("c1", 1)
    assert final.startswith("echo: three files\nreceived notes.txt (text/plain, 17 B)")
    assert "[attachment huge.bin was not received: it is larger than 100.0 kB" in final
    assert "[attachment old.pdf was not received: the platform no longer has this file]" in final
    notices = h.adapter.texts("c1", kinds=("notice",))
    assert (
        len(notices) == 2 and any("huge.bin" in n for n in notices) and any("old.pdf" in n for n in notices)
    )
    (request,) = h.agent.requests()
    assert request.messages[0].media_notes and "old.pdf" in request.model_input
    assert h.query("SELECT count(*) FROM media WHERE error IS NOT NULL") == [(2,)]


async def test_a_recorded_fetch_is_not_repeated_and_an_unfinished_one_is(make_harness, wait, tmp_path):
    image = png()
    adapter = FileAdapter({"f1": image, "f2": image})
    h = await make_harness(adapter=adapter, media=settings(tmp_path))
    fetcher = h.runner._media
    assert fetcher is not None
    await h.admission.admit(with_files(h.inbound("two", chat_id="c1"), Attachment("photo", "f1")))
    await h.finals("c1", 1)
    ((seq, inbound_json),) = h.query("SELECT seq, inbound_json FROM inbox")
    item = QueuedItem(seq, "k", Inbound.from_dict(json.loads(inbound_json)), 2)
    again = await fetcher.fetch([item])
    assert adapter.opened == ["f1"]  # recorded: not fetched again
    assert again.all_items()[0].sha == h.agent.requests()[0].turn_media[0].sha

    adapter.gate = asyncio.Event()  # a download that hangs mid-way, then is cut off (a crash)
    stuck = replace(item, seq=item.seq + 1000)
    task = asyncio.create_task(fetcher.fetch([stuck]))
    await wait(lambda: len(adapter.opened) == 2)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert await h.store.media_record(f"{stuck.seq}:0") is None  # nothing recorded
    assert os.listdir(tmp_path / "blobs" / "tmp") == []  # and no partial file left
    adapter.gate.set()
    redone = await fetcher.fetch([stuck])
    assert adapter.opened == ["f1", "f1", "f1"] and redone.all_items()


async def test_a_stored_attachment_is_trusted_only_from_a_platform_that_signs_its_uploads(
    make_harness, tmp_path
):
    adapter = FileAdapter({})  # no ``takes_uploads``: its "stored" refs are untrusted data
    h = await make_harness(adapter=adapter, media=settings(tmp_path))
    forged = Attachment("stored", "a" * 64, "image/png", "secret.png", 10)
    await h.admission.admit(with_files(h.inbound("peek", chat_id="c1"), forged))
    (final,) = await h.finals("c1", 1)
    assert "secret.png was not received: the platform no longer has this file" in final
    assert adapter.opened == ["a" * 64]  # asked the platform like any other file, never the blob store


async def test_only_the_latest_files_of_the_history_are_sent_again(make_harness, tmp_path):
    files = {f"f{i}": png(10 + i, 10) for i in range(3)}
    adapter = FileAdapter(files)
    h = await make_harness(adapter=adapter, media=settings(tmp_path, history_files=1))
    for i in range(3):
        await h.admission.admit(with_files(h.inbound(f"pic {i}", chat_id="c1"), Attachment("photo", f"f{i}")))
        await h.finals("c1", i + 1)
    await h.send("which ones?", chat_id="c1")
    await h.finals("c1", 4)
    last = h.agent.requests()[-1]
    shown = [e.media[0] for e in last.history if e.media]
    assert len(shown) == 3
    assert last.media[shown[-1].sha].encoded is not None  # the latest: sent again
    assert [last.media[i.sha].note for i in shown[:2]] == ["sent earlier in this conversation"] * 2
