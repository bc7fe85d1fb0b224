"""The schedules role over PostgreSQL (``schedules`` table, schema v2).

As on SQLite, a row holds a schedule's definition and only its *next* firing time; the
firings are inbox rows (``schedule:<id>:<time>`` delivery ids). ``advance`` is a
compare-and-set on the firing it records, so two processes of a fleet that both saw a
schedule due advance it once. ``save`` locks the row it may rewrite (``FOR UPDATE``), and
a new id is inserted ``ON CONFLICT DO NOTHING``, so concurrent saves of one id keep one row.
"""

from __future__ import annotations

import asyncpg

from chatgate.domain.schedules import Schedule
from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.forwards import reads, writes
from chatgate.store.postgres.sql import rowcount
from chatgate.store.rows import SCHEDULE, schedule_definition, schedule_of, schedule_values


async def get_schedule(conn: asyncpg.Connection, schedule_id: str, lock: bool = False) -> Schedule | None:
    query = f"SELECT {SCHEDULE} FROM schedules WHERE id = $1" + (" FOR UPDATE" if lock else "")
    row = await conn.fetchrow(query, schedule_id)
    return None if row is None else schedule_of(row)


async def _insert(conn: asyncpg.Connection, s: Schedule) -> bool:
    status = await conn.execute(
        f"INSERT INTO schedules ({SCHEDULE}, session_key)"
        " VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15) ON CONFLICT (id) DO NOTHING",
        *schedule_values(s, bool),
    )
    return rowcount(status) == 1


async def save_schedule(conn: asyncpg.Connection, schedule: Schedule) -> Schedule:
    if await _insert(conn, schedule):
        return schedule
    stored = await get_schedule(conn, schedule.id, lock=True)
    if stored is None:  # deleted by a peer between the two statements: this save creates it again
        await _insert(conn, schedule)
        return schedule
    if stored.kept_over(schedule):
        return stored
    await conn.execute(
        "UPDATE schedules SET name = $1, kind = $2, spec = $3, text = $4, target_json = $5, session_key = $6,"
        " deliver_only = $7, next_fire_at = $8, meta_json = $9 WHERE id = $10",
        *schedule_definition(schedule, bool),
    )
    found = await get_schedule(conn, schedule.id)
    assert found is not None
    return found


async def list_schedules(conn: asyncpg.Connection, session_key: str | None = None) -> list[Schedule]:
    if session_key is None:
        rows = await conn.fetch(f"SELECT {SCHEDULE} FROM schedules ORDER BY created_at, id")
    else:
        rows = await conn.fetch(
            f"SELECT {SCHEDULE} FROM schedules WHERE session_key = $1 ORDER BY created_at, id", session_key
        )
    return [schedule_of(r) for r in rows]


async def due_schedules(conn: asyncpg.Connection, now: float, limit: int) -> list[Schedule]:
    rows = await conn.fetch(
        f"SELECT {SCHEDULE} FROM schedules WHERE NOT paused AND next_fire_at IS NOT NULL"
        " AND next_fire_at <= $1 ORDER BY next_fire_at, id LIMIT $2",
        now,
        limit,
    )
    return [schedule_of(r) for r in rows]


async def next_schedule_at(conn: asyncpg.Connection) -> float | None:
    found = await conn.fetchval(
        "SELECT MIN(next_fire_at) FROM schedules WHERE NOT paused AND next_fire_at IS NOT NULL"
    )
    return None if found is None else float(found)


async def advance_schedule(
    conn: asyncpg.Connection, schedule_id: str, fired_at: float, next_fire_at: float | None
) -> bool:
    status = await conn.execute(
        "UPDATE schedules SET next_fire_at = $1, last_fired_at = $2, fired = fired + 1"
        " WHERE id = $3 AND next_fire_at = $2",
        next_fire_at,
        fired_at,
        schedule_id,
    )
    return rowcount(status) == 1


async def pause_schedule(conn: asyncpg.Connection, schedule_id: str, paused: bool) -> bool:
    status = await conn.execute("UPDATE schedules SET paused = $1 WHERE id = $2", paused, schedule_id)
    return rowcount(status) == 1


async def delete_schedule(conn: asyncpg.Connection, schedule_id: str) -> bool:
    return rowcount(await conn.execute("DELETE FROM schedules WHERE id = $1", schedule_id)) == 1


class PgSchedules(PgRole):
    """``Schedules``: each write is one transaction, committed before it returns."""

    save_schedule = writes(save_schedule)

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        return await self._db.read(lambda c: get_schedule(c, schedule_id))

    list_schedules = reads(list_schedules)
    due_schedules = reads(due_schedules)
    next_schedule_at = reads(next_schedule_at)
    advance_schedule = writes(advance_schedule)
    pause_schedule = writes(pause_schedule)
    delete_schedule = writes(delete_schedule)
