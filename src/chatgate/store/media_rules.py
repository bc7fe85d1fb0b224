"""What both dialects agree a blob and a media row are: names, chunking, row mapping.

A blob is named by the sha256 of its bytes (64 lower-case hex digits, checked before it names
a file or a row: a name from anywhere else never reaches a path). SQLite keeps blobs as files
under ``<state dir>/blobs/<sha[:2]>/<sha>``; PostgreSQL as rows of ``CHUNK_BYTES`` each.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chatgate.domain.media import MediaItem, MediaRecord

CHUNK_BYTES = 1024 * 1024
SWEEP_BATCH = 500
"""Records or blobs one retention step removes (a pass repeats steps until one removes fewer)."""
KEY_BYTES = 32
_SHA = re.compile(r"^[0-9a-f]{64}$")

MEDIA_COLUMNS = "key, sha, mime, size, name, error, transcript, transcript_error, owner"


def checked_sha(sha: str) -> str:
    if not _SHA.match(sha):
        raise ValueError(f"not a sha256 hex digest: {sha[:80]!r}")
    return sha


def blob_path(root: Path, sha: str) -> Path:
    """Where the file store keeps a blob: fanned out by the first two hex digits."""
    sha = checked_sha(sha)
    return root / sha[:2] / sha


def record_row(record: MediaRecord) -> tuple[Any, ...]:
    """The row's values in ``MEDIA_COLUMNS`` order."""
    item = record.item
    if item is None:
        error = record.error or "not fetched"
        return (record.key, None, None, None, record.name, error, None, None, record.owner)
    return (
        record.key,
        checked_sha(item.sha),
        item.mime,
        item.size,
        record.name or item.name,
        None,
        record.transcript,
        record.transcript_error,
        record.owner,
    )


def record_of(row: Any) -> MediaRecord:
    key, sha, mime, size, name, error = row[0], row[1], row[2], row[3], row[4], row[5]
    item = MediaItem(sha, mime, int(size), name) if sha is not None else None
    return MediaRecord(key, item, error, name, transcript=row[6], transcript_error=row[7], owner=row[8])


def file_chunks(path: str) -> Iterator[bytes]:
    """A file's bytes in ``CHUNK_BYTES`` pieces (call from a thread)."""
    with open(path, "rb") as f:
        while piece := f.read(CHUNK_BYTES):
            yield piece


def stored_blobs(root: Path) -> Iterator[tuple[str, Path]]:
    """Every blob file under ``root`` by sha (not ``tmp``, not a ``.partial`` copy)."""
    if not root.is_dir():
        return
    for fan in root.iterdir():
        if len(fan.name) != 2 or not fan.is_dir():
            continue
        for entry in fan.iterdir():
            if _SHA.match(entry.name):
                yield entry.name, entry


def new_key() -> bytes:
    return os.urandom(KEY_BYTES)


def fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (the directory entry is data too)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
