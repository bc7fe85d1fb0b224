"""The session profiles role over SQLite: each session's ``/model`` choice, by session key."""

from __future__ import annotations

import sqlite3

from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads, writes


def session_profile(conn: sqlite3.Connection, session_key: str) -> str | None:
    row = conn.execute(
        "SELECT profile FROM session_profiles WHERE session_key = ?", (session_key,)
    ).fetchone()
    return None if row is None else str(row[0])


def set_session_profile(conn: sqlite3.Connection, session_key: str, profile: str, now: float) -> None:
    conn.execute(
        "INSERT INTO session_profiles (session_key, profile, updated_at) VALUES (?,?,?)"
        " ON CONFLICT (session_key) DO UPDATE SET profile = excluded.profile,"
        " updated_at = excluded.updated_at"
        " WHERE profile != excluded.profile",
        (session_key, profile, now),
    )


class SqliteSessionProfiles(SqliteRole):
    """``SessionProfiles``."""

    session_profile = reads(session_profile)
    set_session_profile = writes(set_session_profile, redoable=True)  # an upsert: twice is once
