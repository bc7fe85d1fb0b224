"""The media role over SQLite: fetch outcomes in the ``media`` table, blobs as files.

Blobs live under ``<dir of the database>/blobs`` (the state directory by default), one file
per sha256 (``media_rules.blob_path``). The file work runs on the store's reader threads: off
the event loop, and refused loudly (``StoreUnavailable``) once the store is closed, like
every other call.
"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import BinaryIO

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.media import BlobStream, MediaRecord
from chatgate.store.media_rules import (
    CHUNK_BYTES,
    MEDIA_COLUMNS,
    SWEEP_BATCH,
    blob_path,
    fsync_dir,
    new_key,
    record_of,
    record_row,
    stored_blobs,
)
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads


def media_record(conn: sqlite3.Connection, key: str) -> MediaRecord | None:
    row = conn.execute(f"SELECT {MEDIA_COLUMNS} FROM media WHERE key = ?", (key,)).fetchone()
    return record_of(row) if row else None


def record_media(conn: sqlite3.Connection, record: MediaRecord, now: float) -> MediaRecord:
    conn.execute(
        f"INSERT INTO media ({MEDIA_COLUMNS}, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)"
        " ON CONFLICT (key) DO NOTHING",
        (*record_row(record), now),
    )
    found = media_record(conn, record.key)
    assert found is not None  # inserted now or before, in this transaction
    return found


_BLOBS = threading.Lock()
"""Taking a blob in and sweeping one out never interleave: a blob stored again is touched (its
mtime is its age for retention) before the sweep can judge it old and unreferenced."""


def move_in(root: Path, sha: str, path: str) -> None:
    with _BLOBS:
        _move_in(root, sha, path)


def _move_in(root: Path, sha: str, path: str) -> None:
    """Put the file at ``path`` in place as the blob ``sha``: fsync, rename, fsync the directory."""
    dest = blob_path(root, sha)
    if dest.exists():
        os.utime(dest)  # stored again now: young again for the retention sweep
        os.unlink(path)
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "rb") as f:
        os.fsync(f.fileno())
    try:
        os.replace(path, dest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        partial = dest.with_name(dest.name + ".partial")  # another file system: copy, then rename
        with open(path, "rb") as src, open(partial, "wb") as out:
            shutil.copyfileobj(src, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, dest)
        os.unlink(path)
    fsync_dir(dest.parent)


def read_file(root: Path, sha: str) -> bytes | None:
    try:
        return blob_path(root, sha).read_bytes()
    except FileNotFoundError:
        return None


def media_usage(conn: sqlite3.Connection, owner: str) -> int:
    sql = "SELECT COALESCE(SUM(size), 0) FROM media WHERE owner = ? AND sha IS NOT NULL"
    row = conn.execute(sql, (owner,))
    return int(row.fetchone()[0])


def expire_media(conn: sqlite3.Connection, before: float) -> int:
    found = conn.execute(
        "DELETE FROM media WHERE key IN (SELECT key FROM media WHERE created_at < ? LIMIT ?)",
        (before, SWEEP_BATCH),
    )
    return found.rowcount


def sweep_files(conn: sqlite3.Connection, root: Path, before: float) -> int:
    """Remove the blob files stored before ``before`` that no record names (at most a batch)."""
    removed = 0
    for sha, path in stored_blobs(root):
        with _BLOBS:
            try:
                if path.stat().st_mtime >= before:
                    continue
            except FileNotFoundError:
                continue
            if conn.execute("SELECT 1 FROM media WHERE sha = ? LIMIT 1", (sha,)).fetchone():
                continue
            path.unlink(missing_ok=True)
        removed += 1
        if removed >= SWEEP_BATCH:
            break
    return removed


def shared_key(conn: sqlite3.Connection, name: str) -> bytes:
    conn.execute(
        "INSERT INTO gateway_keys (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING",
        (name, new_key(), time.time()),
    )
    return bytes(conn.execute("SELECT value FROM gateway_keys WHERE name = ?", (name,)).fetchone()[0])


class _FilePieces:
    """An open blob file's bytes in pieces, each read in a thread. The file is closed at the end,
    or by ``aclose`` (the reader stopped early, or never began: an upload that was not made).
    A file unlinked meanwhile is still read whole (POSIX)."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self._f = f
        self._left = size

    def __aiter__(self) -> _FilePieces:
        return self

    async def __anext__(self) -> bytes:
        if self._f.closed:
            raise StopAsyncIteration
        if self._left <= 0:
            await self.aclose()
            raise StopAsyncIteration
        piece = await asyncio.to_thread(self._f.read, min(CHUNK_BYTES, self._left))
        if not piece:
            await self.aclose()
            raise StoreUnavailable("the blob file was cut short while it was read")
        self._left -= len(piece)
        return piece

    async def aclose(self) -> None:
        if not self._f.closed:
            await asyncio.to_thread(self._f.close)


class SqliteMedia(SqliteRole):
    """``Media``."""

    media_record = reads(media_record)

    @property
    def blob_root(self) -> Path:
        return Path(self._db.path).parent / "blobs"

    async def record_media(self, record: MediaRecord, now: float) -> MediaRecord:
        return await self._db.write(lambda c: record_media(c, record, now))

    async def put_blob(self, sha: str, path: str) -> None:
        root = self.blob_root
        await self._db.read(lambda c: move_in(root, sha, path))

    async def read_blob(self, sha: str) -> bytes | None:
        root = self.blob_root
        return await self._db.read(lambda c: read_file(root, sha))

    media_usage = reads(media_usage)

    async def open_blob(self, sha: str) -> BlobStream | None:
        path = blob_path(self.blob_root, sha)
        try:  # opened on a reader thread: refused loudly once the store is closed
            f = await self._db.read(lambda c: open(path, "rb"))  # noqa: SIM115  (closed by the stream)
        except FileNotFoundError:
            return None
        size = os.fstat(f.fileno()).st_size
        return BlobStream(size, _FilePieces(f, size))

    async def expire_media(self, before: float) -> int:
        return await self._db.write(lambda c: expire_media(c, before))

    async def sweep_blobs(self, before: float) -> int:
        root = self.blob_root
        return await self._db.read(lambda c: sweep_files(c, root, before))

    async def shared_key(self, name: str) -> bytes:
        return await self._db.write(lambda c: shared_key(c, name))
