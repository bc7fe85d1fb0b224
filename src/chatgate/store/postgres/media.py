"""The media role over PostgreSQL: fetch outcomes in ``media``, blobs as ~1 MB chunk rows.

Every process of a fleet reads every blob. A blob is written in one transaction, chunk by chunk
from its file (read in a thread, never whole in memory), and marked complete in ``media_blobs``
last, so a reader never sees half of one.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import AsyncGenerator

import asyncpg

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.media import BlobStream, MediaRecord
from chatgate.store.media_rules import (
    MEDIA_COLUMNS,
    SWEEP_BATCH,
    checked_sha,
    file_chunks,
    new_key,
    record_of,
    record_row,
)
from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.forwards import reads, writes


async def media_record(conn: asyncpg.Connection, key: str) -> MediaRecord | None:
    row = await conn.fetchrow(f"SELECT {MEDIA_COLUMNS} FROM media WHERE key = $1", key)
    return record_of(row) if row else None


async def record_media(conn: asyncpg.Connection, record: MediaRecord, now: float) -> MediaRecord:
    await conn.execute(
        f"INSERT INTO media ({MEDIA_COLUMNS}, created_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)"
        " ON CONFLICT (key) DO NOTHING",
        *record_row(record),
        now,
    )
    found = await media_record(conn, record.key)
    assert found is not None  # inserted now or before, in this transaction
    return found


async def write_blob(conn: asyncpg.Connection, sha: str, path: str) -> None:
    # Stored already: touched, young again for the retention sweep (which holds the row while it
    # deletes: this waits for it, then finds the blob gone and writes it again).
    touch = "UPDATE media_blobs SET created_at = $2 WHERE sha = $1 RETURNING 1"
    if await conn.fetchval(touch, sha, time.time()):
        return
    await conn.execute("DELETE FROM media_chunks WHERE sha = $1", sha)  # a retried write starts over
    chunks = file_chunks(path)
    idx = size = 0
    while (piece := await asyncio.to_thread(next, chunks, None)) is not None:
        await conn.execute("INSERT INTO media_chunks (sha, idx, data) VALUES ($1, $2, $3)", sha, idx, piece)
        idx, size = idx + 1, size + len(piece)
    await conn.execute(
        "INSERT INTO media_blobs (sha, size, chunks, created_at) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT (sha) DO NOTHING",
        sha,
        size,
        idx,
        time.time(),
    )


async def read_blob(conn: asyncpg.Connection, sha: str) -> bytes | None:
    if not await conn.fetchval("SELECT 1 FROM media_blobs WHERE sha = $1", sha):
        return None
    rows = await conn.fetch("SELECT data FROM media_chunks WHERE sha = $1 ORDER BY idx", sha)
    return b"".join(r[0] for r in rows)


async def blob_mark(conn: asyncpg.Connection, sha: str) -> asyncpg.Record | None:
    return await conn.fetchrow("SELECT size, chunks FROM media_blobs WHERE sha = $1", sha)


async def blob_piece(conn: asyncpg.Connection, sha: str, idx: int) -> bytes | None:
    found = await conn.fetchval("SELECT data FROM media_chunks WHERE sha = $1 AND idx = $2", sha, idx)
    return bytes(found) if found is not None else None


async def media_usage(conn: asyncpg.Connection, owner: str) -> int:
    found = await conn.fetchval(
        "SELECT COALESCE(SUM(size), 0) FROM media WHERE owner = $1 AND sha IS NOT NULL", owner
    )
    return int(found)


async def expire_media(conn: asyncpg.Connection, before: float) -> int:
    status = await conn.execute(
        "DELETE FROM media WHERE key IN (SELECT key FROM media WHERE created_at < $1 LIMIT $2)",
        before,
        SWEEP_BATCH,
    )
    return int(status.split()[-1])


async def sweep_blobs(conn: asyncpg.Connection, before: float) -> int:
    """Blobs stored before ``before`` that no record names: their marks, then their chunks, in one
    transaction (a writer storing the same sha again waits on the mark's row lock)."""
    gone = await conn.fetch(
        "DELETE FROM media_blobs WHERE sha IN (SELECT b.sha FROM media_blobs b WHERE b.created_at < $1"
        " AND NOT EXISTS (SELECT 1 FROM media m WHERE m.sha = b.sha) LIMIT $2 FOR UPDATE SKIP LOCKED)"
        " AND created_at < $1 RETURNING sha",
        before,
        SWEEP_BATCH,
    )
    shas = [r[0] for r in gone]
    if shas:
        await conn.execute("DELETE FROM media_chunks WHERE sha = ANY($1::text[])", shas)
    return len(shas)


async def shared_key(conn: asyncpg.Connection, name: str) -> bytes:
    await conn.execute(
        "INSERT INTO gateway_keys (name, value, created_at) VALUES ($1, $2, $3)"
        " ON CONFLICT (name) DO NOTHING",
        name,
        new_key(),
        time.time(),
    )
    return bytes(await conn.fetchval("SELECT value FROM gateway_keys WHERE name = $1", name))


class PgMedia(PgRole):
    """``Media``."""

    media_record = reads(media_record)
    record_media = writes(record_media)
    read_blob = reads(read_blob)
    media_usage = reads(media_usage)
    expire_media = writes(expire_media)
    sweep_blobs = writes(sweep_blobs)
    shared_key = writes(shared_key)

    async def open_blob(self, sha: str) -> BlobStream | None:
        sha = checked_sha(sha)
        mark = await self._db.read(lambda c: blob_mark(c, sha))
        if mark is None:
            return None
        return BlobStream(int(mark["size"]), self._pieces(sha, int(mark["chunks"])))

    async def _pieces(self, sha: str, chunks: int) -> AsyncGenerator[bytes, None]:
        """One chunk row per query: a reader holds one piece, and no connection between them."""
        for idx in range(chunks):
            piece = await self._db.read(functools.partial(blob_piece, sha=sha, idx=idx))
            if piece is None:
                raise StoreUnavailable("the blob was removed while it was read")
            yield piece

    async def put_blob(self, sha: str, path: str) -> None:
        checked_sha(sha)
        await self._db.write(lambda c: write_blob(c, sha, path))
        await asyncio.to_thread(os.unlink, path)
