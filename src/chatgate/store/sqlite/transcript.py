"""The transcript role over SQLite: sessions and what was said in them.

``append_transcript`` is written by a turn's commit (``leases.complete_turn``); the
rest are reads.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from chatgate.domain.history import HistoryEntry, history_entry
from chatgate.domain.sessions import SessionInfo
from chatgate.domain.source import Source
from chatgate.store.rows import SESSION_INFO, session_info_of
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads
from chatgate.store.sqlite.plans import QUEUED_ROWS

_SESSION_INFO = SESSION_INFO.format(queued=QUEUED_ROWS)


def append_transcript(
    conn: sqlite3.Connection, session_id: str, session_key: str, entries: Sequence[HistoryEntry], now: float
) -> None:
    conn.executemany(
        "INSERT INTO transcript (session_id, session_key, role, content, created_at, media_json)"
        " VALUES (?,?,?,?,?,?)",
        [(session_id, session_key, e.role, e.content, now, e.media_json()) for e in entries],
    )


def history(conn: sqlite3.Connection, session_id: str, limit: int) -> list[HistoryEntry]:
    rows = conn.execute(
        "SELECT role, content, media_json FROM (SELECT id, role, content, media_json FROM transcript"
        " WHERE session_id = ?"
        " ORDER BY id DESC LIMIT ?) ORDER BY id",
        (session_id, limit),
    ).fetchall()
    return [history_entry(r[0], r[1], r[2]) for r in rows]


def session_source(conn: sqlite3.Connection, session_key: str) -> Source | None:
    found = conn.execute("SELECT source_json FROM sessions WHERE key = ?", (session_key,)).fetchone()
    return Source.from_dict(json.loads(found[0])) if found else None


def session_info(conn: sqlite3.Connection, session_key: str) -> SessionInfo | None:
    row = conn.execute(_SESSION_INFO + " WHERE s.key = ?", (session_key,)).fetchone()
    return session_info_of(row) if row else None


def list_sessions(conn: sqlite3.Connection, limit: int = 100) -> list[SessionInfo]:
    rows = conn.execute(_SESSION_INFO + " ORDER BY s.last_activity DESC LIMIT ?", (limit,))
    return [session_info_of(r) for r in rows.fetchall()]


class SqliteTranscript(SqliteRole):
    """``Transcript``: every method is a read."""

    history = reads(history)

    session_source = reads(session_source)
    session_info = reads(session_info)

    list_sessions = reads(list_sessions)
