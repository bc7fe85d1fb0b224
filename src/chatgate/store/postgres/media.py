"""The media role over PostgreSQL: fetch outcomes in ``media``, blobs as ~1 MB chunk rows.

Every process of a fleet reads every blob. A blob is written in one transaction, chunk by chunk
from its file (read in a thread, never whole in memory), and marked complete in ``media_blobs``
last, so a reader never sees half of one.
"""

from __future__ import annotations

import asyncio
import os
import time

import asyncpg

from chatgate.domain.media import MediaRecord
from chatgate.store.media_rules import MEDIA_COLUMNS, checked_sha, file_chunks, record_of, record_row
from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.forwards import reads, writes


async def media_record(conn: asyncpg.Connection, key: str) -> MediaRecord | None:
    row = await conn.fetchrow(f"SELECT {MEDIA_COLUMNS} FROM media WHERE key = $1", key)
    return record_of(row) if row else None


async def record_media(conn: asyncpg.Connection, record: MediaRecord, now: float) -> MediaRecord:
    await conn.execute(
        f"INSERT INTO media ({MEDIA_COLUMNS}, created_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)"
        " ON CONFLICT (key) DO NOTHING",
        *record_row(record),
        now,
    )
    found = await media_record(conn, record.key)
    assert found is not None  # inserted now or before, in this transaction
    return found


async def write_blob(conn: asyncpg.Connection, sha: str, path: str) -> None:
    if await conn.fetchval("SELECT 1 FROM media_blobs WHERE sha = $1", sha):
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


class PgMedia(PgRole):
    """``Media``."""

    media_record = reads(media_record)
    record_media = writes(record_media)
    read_blob = reads(read_blob)

    async def put_blob(self, sha: str, path: str) -> None:
        checked_sha(sha)
        await self._db.write(lambda c: write_blob(c, sha, path))
        await asyncio.to_thread(os.unlink, path)
