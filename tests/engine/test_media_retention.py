"""Retention and quotas with the real engine and store (SQLite; the store steps are also in the
contract suite on PostgreSQL): an expired file is a note in the history, never a failed turn; a
file past its sender's quota is refused with a line naming the limit, and the rest is answered."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from chatgate.domain.inbound import Attachment, Inbound
from chatgate.domain.media import MediaLimits
from chatgate.engine.media_retention import DAY, RetentionSweeper
from chatgate.engine.pipeline import MediaSettings
from engine.test_media_fetch import FileAdapter


def settings(tmp_path: Path, **limits: Any) -> MediaSettings:
    return MediaSettings(MediaLimits(**limits), tmp_path / "blobs" / "tmp")


def with_files(inbound: Inbound, *attachments: Attachment) -> Inbound:
    return replace(inbound, attachments=attachments)


def blob_files(tmp_path: Path) -> list[Path]:
    return [p for p in (tmp_path / "blobs").rglob("*") if p.is_file() and p.parent.name != "tmp"]


async def test_an_expired_file_is_a_note_in_the_history_and_its_blob_is_gone(make_harness, wait, tmp_path):
    adapter = FileAdapter({"n1": b"the launch code is 4242\n"})
    h = await make_harness(adapter=adapter, media=settings(tmp_path, retention_days=30))
    await h.admission.admit(
        with_files(h.inbound("keep this", chat_id="c1"), Attachment("document", "n1", None, "code.txt"))
    )
    await h.finals("c1", 1)
    assert len(blob_files(tmp_path)) == 1

    later = RetentionSweeper(h.store, 30, clock=lambda: time.time() + 31 * DAY)  # a month on
    assert await later.sweep() == (1, 1)
    assert h.query("SELECT count(*) FROM media") == [(0,)] and blob_files(tmp_path) == []
    assert await later.sweep() == (0, 0)  # the next pass finds nothing

    await h.send("what was the code?", chat_id="c1")
    await h.finals("c1", 2)
    request = h.agent.requests()[-1]
    (item,) = [i for e in request.history for i in e.media]
    assert request.media[item.sha].note == "it expired after 30 days (media.retention_days)"
    assert request.media[item.sha].text is None


async def test_the_sweeper_runs_as_an_owned_task_and_stops_when_asked(make_harness, wait, tmp_path):
    adapter = FileAdapter({"n1": b"notes\n"})
    h = await make_harness(adapter=adapter, media=settings(tmp_path, retention_days=1))
    await h.admission.admit(
        with_files(h.inbound("x", chat_id="c1"), Attachment("document", "n1", None, "a.txt"))
    )
    await h.finals("c1", 1)
    sweeper = RetentionSweeper(h.store, 1, interval=0.05, clock=lambda: time.time() + 2 * DAY)
    sweeper.start()
    task = sweeper._task
    await wait(lambda: h.query("SELECT count(*) FROM media") == [(0,)] and not blob_files(tmp_path))
    await sweeper.stop()
    assert task is not None and task.done() and sweeper._task is None


async def test_a_file_past_the_senders_quota_is_refused_naming_the_limit(make_harness, tmp_path):
    files = {"a": b"a" * 6000 + b"\n", "b": b"b" * 6000 + b"\n", "c": b"c" * 3000 + b"\n"}
    adapter = FileAdapter(files)
    h = await make_harness(
        adapter=adapter, media=settings(tmp_path, quota_bytes_per_user=10_000, retention_days=7)
    )
    await h.admission.admit(
        with_files(h.inbound("one", chat_id="c1"), Attachment("document", "a", None, "a.txt"))
    )
    await h.finals("c1", 1)
    await h.admission.admit(
        with_files(
            h.inbound("two more", chat_id="c1"),
            Attachment("document", "b", None, "b.txt"),  # 6 kB more: past 10 kB
            Attachment("document", "c", None, "c.txt"),  # 3 kB more: fits
        )
    )
    await h.finals("c1", 2)
    reason = (
        "[attachment b.txt was not received: your files may take 10.0 kB at most and already take 6.0 kB"
        " (files are removed after 7 days, or ask the operator to raise media.quota_mb_per_user)]"
    )
    (notice,) = h.adapter.texts("c1", kinds=("notice",))
    assert notice == reason
    request = h.agent.requests()[-1]
    assert [i.name for i in request.turn_media] == ["c.txt"] and reason in request.model_input
    assert h.query("SELECT owner, sum(size) FROM media WHERE sha IS NOT NULL GROUP BY owner") == [
        ("test:u1", 9002)
    ]
    assert adapter.opened == ["a", "b", "c"]  # b's download stopped at the quota's bound

    await h.admission.admit(
        with_files(h.inbound("mine", chat_id="c2", user_id="u2"), Attachment("document", "b", None, "b.txt"))
    )
    await h.finals("c2", 1)
    assert h.agent.requests()[-1].turn_media  # another user's quota is their own
