"""The cursors role over SQLite: named upstream positions (``cursors`` table)."""

from __future__ import annotations

import sqlite3
import time

from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads


def get_cursor(conn: sqlite3.Connection, name: str) -> str | None:
    row = conn.execute("SELECT value FROM cursors WHERE name = ?", (name,)).fetchone()
    return str(row[0]) if row else None


def set_cursor(conn: sqlite3.Connection, name: str, value: str, now: float) -> None:
    conn.execute(
        "INSERT INTO cursors (name, value, updated_at) VALUES (?,?,?) ON CONFLICT (name)"
        " DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (name, value, now),
    )


class SqliteCursors(SqliteRole):
    """``Cursors``: ``set_cursor`` returns once its value is committed."""

    get_cursor = reads(get_cursor)

    async def set_cursor(self, name: str, value: str, *, durable: bool = False) -> None:
        now = time.time()
        # Redoable unless asked: a cursor lost to a power cut refetches from the one before, and
        # admission recognizes every redelivered event by its delivery id.
        await self._db.write(lambda c: set_cursor(c, name, value, now), redoable=not durable)
