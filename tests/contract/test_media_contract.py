"""The media role's contract: a fetch's outcome is recorded once (the first wins, so a re-run turn
reads it instead of fetching again), blobs are content-addressed and survive a restart, and the
transcript keeps the items a message sent the model."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from pathlib import Path

import pytest

from chatgate.domain.history import HistoryEntry
from chatgate.domain.media import BlobGone, FileBody, MediaItem, MediaRecord
from chatgate.domain.store_roles import Media, Transcript
from chatgate.domain.turns import TurnOutcome
from contract.kit import T0, covers, req


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


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


@covers(Media.media_usage)
async def test_a_users_usage_is_the_size_of_their_stored_files(store):
    mine = MediaItem("c" * 64, "image/png", 1000, "a.png")
    await store.record_media(MediaRecord("9:0", mine, None, "a.png", owner="web:u1"), T0)
    await store.record_media(MediaRecord("9:1", mine, None, "a.png", owner="web:u1"), T0)  # counted twice
    await store.record_media(MediaRecord("9:2", None, "too big", "b.png", owner="web:u1"), T0)  # nothing kept
    await store.record_media(MediaRecord("9:3", mine, None, "a.png", owner="web:u2"), T0)
    assert await store.media_usage("web:u1") == 2000
    assert await store.media_usage("web:u2") == 1000
    assert await store.media_usage("web:nobody") == 0
    assert (await store.media_record("9:0")).owner == "web:u1"


@covers(Media.expire_media, Media.sweep_blobs)
async def test_retention_removes_old_records_then_the_blobs_no_record_names(store, tmp_path):
    old_only, shared, orphan = b"only an old record names me", b"an old and a new record name me", b"nobody"
    shas = {}
    for data in (old_only, shared, orphan):
        sha, path = blob_file(tmp_path, data)
        await store.put_blob(sha, path)
        shas[data] = sha
    old = MediaItem(shas[old_only], "text/plain", 27, "a.txt")
    both = MediaItem(shas[shared], "text/plain", 31, "b.txt")
    await store.record_media(MediaRecord("1:0", old, None), T0)
    await store.record_media(MediaRecord("1:1", both, None), T0)
    await store.record_media(MediaRecord("2:0", both, None), T0 + 100)
    assert await store.sweep_blobs(time.time() - 3600) == 0  # every blob is younger than that
    assert await store.expire_media(T0 + 50) == 2
    assert await store.media_record("1:0") is None and await store.media_record("1:1") is None
    assert await store.media_record("2:0") is not None
    assert await store.sweep_blobs(time.time() + 1) == 2  # the old-only blob and the orphan
    assert await store.read_blob(shas[old_only]) is None
    orphan_sha = shas[orphan]
    assert await store.read_blob(orphan_sha) is None
    assert await store.read_blob(shas[shared]) == shared  # a newer record still names it
    assert await store.sweep_blobs(time.time() + 1) == 0  # idempotent: a second pass finds nothing
    assert await store.expire_media(T0 + 50) == 0
    _, again = blob_file(tmp_path, orphan)
    await store.put_blob(orphan_sha, again)  # a swept blob can be stored again
    assert await store.read_blob(orphan_sha) == orphan


@covers(Media.put_blob, Media.sweep_blobs)
async def test_a_blob_stored_again_is_young_again_for_the_sweep(store, tmp_path):
    data = b"sent long ago, uploaded again today"
    sha, path = blob_file(tmp_path, data)
    await store.put_blob(sha, path)
    await asyncio.sleep(0.05)  # past the file system's timestamp granularity
    cutoff = time.time()
    await asyncio.sleep(0.05)
    _, again = blob_file(tmp_path, data)
    await store.put_blob(sha, again)  # the upload before its message's record: no record yet
    assert await store.sweep_blobs(cutoff) == 0
    assert await store.read_blob(sha) == data


@covers(Media.shared_key)
async def test_a_shared_key_is_made_once_and_read_by_every_store_of_the_backend(backend):
    first, second = backend.store(), backend.store()
    await first.open()
    try:
        key = await first.shared_key("uploads")
        assert len(key) == 32
        assert await first.shared_key("uploads") == key
        assert await first.shared_key("other") != key
    finally:
        await first.close()
    await second.open()
    try:
        assert await second.shared_key("uploads") == key  # a restart, or another process of a fleet
    finally:
        await second.close()


@covers(Media.open_blob)
async def test_a_blob_streams_in_pieces_and_a_missing_one_is_none(store, tmp_path):
    data = bytes(range(256)) * 9000  # 2.3 MB: three pieces of at most 1 MiB
    sha, path = blob_file(tmp_path, data)
    assert await store.open_blob(sha) is None
    await store.put_blob(sha, path)
    stream = await store.open_blob(sha)
    assert stream is not None and stream.size == len(data)
    pieces = [piece async for piece in stream.chunks]
    assert b"".join(pieces) == data
    assert len(pieces) == 3 and max(len(p) for p in pieces) <= 1024 * 1024
    with pytest.raises(ValueError):
        await store.open_blob("../../etc/passwd")


@covers(Media.open_blob)
async def test_an_upload_body_reads_the_blob_afresh_each_time_and_says_when_it_is_gone(store, tmp_path):
    data = bytes(range(256)) * 6000  # 1.5 MB: two pieces
    sha, path = blob_file(tmp_path, data)
    await store.put_blob(sha, path)
    first = await store.open_blob(sha)
    assert first is not None
    body = FileBody(first, lambda: store.open_blob(sha))
    assert body.size == len(data)
    assert b"".join([piece async for piece in body.pieces()]) == data
    assert await body.read() == data  # an upload sent again in the same attempt reads it again
    assert await store.sweep_blobs(time.time() + 1) == 1  # no record names it
    with pytest.raises(BlobGone):
        await body.read()
    await body.close()


@covers(Media.open_blob)
async def test_an_upload_body_no_upload_read_is_released_on_close(store, tmp_path):
    sha, path = blob_file(tmp_path, b"never sent")
    await store.put_blob(sha, path)
    first = await store.open_blob(sha)
    assert first is not None
    body = FileBody(first, lambda: store.open_blob(sha))
    opened = _open_files()
    await body.close()
    with pytest.raises(StopAsyncIteration):
        await anext(first.chunks)  # closed: its file or its query is let go
    assert _open_files() <= opened  # and no descriptor is left open on it (SQLite's file)
    assert await body.read() == b"never sent"  # a later upload opens the blob again
