"""The cursors role over PostgreSQL: named upstream positions (``cursors`` table)."""

from __future__ import annotations

import time

import asyncpg

from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.forwards import reads


async def get_cursor(conn: asyncpg.Connection, name: str) -> str | None:
    found = await conn.fetchval("SELECT value FROM cursors WHERE name = $1", name)
    return None if found is None else str(found)


async def set_cursor(conn: asyncpg.Connection, name: str, value: str, now: float) -> None:
    await conn.execute(
        "INSERT INTO cursors (name, value, updated_at) VALUES ($1,$2,$3) ON CONFLICT (name)"
        " DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        name,
        value,
        now,
    )


class PgCursors(PgRole):
    """``Cursors``: ``set_cursor`` returns once its value is committed."""

    get_cursor = reads(get_cursor)

    async def set_cursor(self, name: str, value: str, *, durable: bool = False) -> None:
        """``durable`` changes nothing here: every PostgreSQL commit is on the disk when it returns."""
        now = time.time()
        await self._db.write(lambda c: set_cursor(c, name, value, now))
