"""The media role's contract: a fetch's outcome is recorded once (the first wins, so a re-run turn
reads it instead of fetching again), blobs are content-addressed and survive a restart, and the
transcript keeps the items a message sent the model."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from chatgate.domain.history import HistoryEntry
from chatgate.domain.media import MediaItem, MediaRecord
from chatgate.domain.store_roles import Media, Transcript
from chatgate.domain.turns import TurnOutcome
from contract.kit import T0, covers, req


def exists(path: str) -> bool:
    return os.path.exists(path)


def blob_file(tmp_path: Path, data: bytes) -> tuple[str, str]:
    path = tmp_path / f"upload-{hashlib.sha256(data).hexdigest()[:8]}"
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest(), str(path)


@covers(Media.media_record, Media.record_media)
async def test_the_first_recorded_outcome_of_an_attachment_wins(store):
    assert await store.media_record("7:0") is None
    item = MediaItem("a" * 64, "image/png", 1234, "photo.png")
    first = await store.record_media(MediaRecord("7:0", item, None, "photo.png"), T0)
    assert first == MediaRecord("7:0", item, None, "photo.png")
    again = await store.record_media(MediaRecord("7:0", None, "too big", "photo.png"), T0)
    assert again == first
    assert await store.media_record("7:0") == first
    failed = await store.record_media(MediaRecord("7:1", None, "the link expired", "doc.pdf"), T0)
    assert failed == MediaRecord("7:1", None, "the link expired", "doc.pdf")
    assert await store.media_record("7:1") == failed


@covers(Media.media_record, Media.record_media)
async def test_a_voice_notes_transcript_or_its_failure_is_kept_with_its_record(store):
    item = MediaItem("b" * 64, "audio/ogg", 9000, "voice.ogg")
    heard = MediaRecord("8:0", item, None, "voice.ogg", transcript="one two three")
    assert await store.record_media(heard, T0) == heard
    assert await store.media_record("8:0") == heard
    refused = MediaRecord("8:1", item, None, "voice.ogg", transcript_error="it is longer than 300 s")
    assert await store.record_media(refused, T0) == refused
    assert (await store.media_record("8:1")) == refused


@covers(Media.put_blob, Media.read_blob)
async def test_blobs_are_content_addressed_durable_and_stored_once(backend, tmp_path):
    data = bytes(range(256)) * 9000  # a little over 2 MB: more than one chunk on PostgreSQL
    sha, path = blob_file(tmp_path, data)
    store = backend.store()
    await store.open()
    try:
        assert await store.read_blob(sha) is None
        await store.put_blob(sha, path)
        assert not exists(path)  # consumed
        assert await store.read_blob(sha) == data
        _, again = blob_file(tmp_path, data)
        await store.put_blob(sha, again)  # the same content again: kept once, file consumed
        assert not exists(again)
        assert await store.read_blob(sha) == data
    finally:
        await store.close()
    reopened = backend.store()
    await reopened.open()
    try:
        assert await reopened.read_blob(sha) == data
    finally:
        await reopened.close()


@covers(Media.put_blob)
async def test_a_name_that_is_not_a_sha_never_reaches_the_blob_store(store, tmp_path):
    _, path = blob_file(tmp_path, b"x")
    with pytest.raises(ValueError):
        await store.put_blob("../../etc/passwd", path)


@covers(Transcript.history)
async def test_history_keeps_the_media_a_message_sent(store):
    await store.admit(req("d1", "k1", "look"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    item = MediaItem("b" * 64, "application/pdf", 99, "report.pdf")
    transcript = (HistoryEntry("user", "look", (item,)), HistoryEntry("assistant", "seen"))
    seqs = tuple(i.seq for i in claim.items)
    await store.complete_turn("w1", TurnOutcome("k1", claim.session_id, seqs, transcript, (), "ok"), 30.0, 1)
    assert await store.history(claim.session_id, 10) == list(transcript)
