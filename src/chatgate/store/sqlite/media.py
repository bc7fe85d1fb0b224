"""The media role over SQLite: fetch outcomes in the ``media`` table, blobs as files.

Blobs live under ``<dir of the database>/blobs`` (the state directory by default), one file
per sha256 (``media_rules.blob_path``). The file work runs on the store's reader threads: off
the event loop, and refused loudly (``StoreUnavailable``) once the store is closed, like
every other call.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from pathlib import Path

from chatgate.domain.media import MediaRecord
from chatgate.store.media_rules import MEDIA_COLUMNS, blob_path, fsync_dir, record_of, record_row
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads


def media_record(conn: sqlite3.Connection, key: str) -> MediaRecord | None:
    row = conn.execute(f"SELECT {MEDIA_COLUMNS} FROM media WHERE key = ?", (key,)).fetchone()
    return record_of(row) if row else None


def record_media(conn: sqlite3.Connection, record: MediaRecord, now: float) -> MediaRecord:
    conn.execute(
        f"INSERT INTO media ({MEDIA_COLUMNS}, created_at) VALUES (?,?,?,?,?,?,?,?,?)"
        " ON CONFLICT (key) DO NOTHING",
        (*record_row(record), now),
    )
    found = media_record(conn, record.key)
    assert found is not None  # inserted now or before, in this transaction
    return found


def move_in(root: Path, sha: str, path: str) -> None:
    """Put the file at ``path`` in place as the blob ``sha``: fsync, rename, fsync the directory."""
    dest = blob_path(root, sha)
    if dest.exists():
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
