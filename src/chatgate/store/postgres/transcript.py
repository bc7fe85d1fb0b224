"""The transcript role over PostgreSQL: sessions and what was said in them.

``append_transcript`` is written by a turn's commit (``leases.complete_turn``); the
rest are reads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import asyncpg

from chatgate.domain.history import HistoryEntry, history_entry
from chatgate.domain.sessions import SessionInfo
from chatgate.domain.source import Source
from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.forwards import reads
from chatgate.store.rows import SESSION_INFO, session_info_of

_SESSION_INFO = SESSION_INFO.format(queued="")


async def append_transcript(
    conn: asyncpg.Connection, session_id: str, session_key: str, entries: Sequence[HistoryEntry], now: float
) -> None:
    if entries:
        await conn.executemany(
            "INSERT INTO transcript (session_id, session_key, role, content, created_at, media_json)"
            " VALUES ($1,$2,$3,$4,$5,$6)",
            [(session_id, session_key, e.role, e.content, now, e.media_json()) for e in entries],
        )


async def history(conn: asyncpg.Connection, session_id: str, limit: int) -> list[HistoryEntry]:
    rows = await conn.fetch(
        "SELECT role, content, media_json FROM (SELECT id, role, content, media_json FROM transcript"
        " WHERE session_id = $1"
        " ORDER BY id DESC LIMIT $2) t ORDER BY id",
        session_id,
        limit,
    )
    return [history_entry(r[0], r[1], r[2]) for r in rows]


async def session_source(conn: asyncpg.Connection, session_key: str) -> Source | None:
    found = await conn.fetchval("SELECT source_json FROM sessions WHERE key = $1", session_key)
    return Source.from_dict(json.loads(found)) if found is not None else None


async def session_info(conn: asyncpg.Connection, session_key: str) -> SessionInfo | None:
    row = await conn.fetchrow(_SESSION_INFO + " WHERE s.key = $1", session_key)
    return session_info_of(row) if row else None


async def list_sessions(conn: asyncpg.Connection, limit: int = 100) -> list[SessionInfo]:
    rows = await conn.fetch(_SESSION_INFO + " ORDER BY s.last_activity DESC LIMIT $1", limit)
    return [session_info_of(r) for r in rows]


class PgTranscript(PgRole):
    """``Transcript``: every method is a read."""

    history = reads(history)

    session_source = reads(session_source)
    session_info = reads(session_info)

    list_sessions = reads(list_sessions)
