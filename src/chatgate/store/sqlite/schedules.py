"""The schedules role over SQLite (``schedules`` table, schema v10).

A row holds a schedule's definition and only its *next* firing time; the firings
themselves are inbox rows (``schedule:<id>:<time>`` delivery ids), so the table never
grows with time. ``advance`` is a compare-and-set on the firing it records.
"""

from __future__ import annotations

import sqlite3

from chatgate.domain.schedules import Schedule
from chatgate.store.rows import SCHEDULE, schedule_definition, schedule_of, schedule_values
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads, writes


def get_schedule(conn: sqlite3.Connection, schedule_id: str) -> Schedule | None:
    row = conn.execute(f"SELECT {SCHEDULE} FROM schedules WHERE id = ?", (schedule_id,)).fetchone()
    return None if row is None else schedule_of(row)


def _insert(conn: sqlite3.Connection, s: Schedule) -> None:
    conn.execute(
        f"INSERT INTO schedules ({SCHEDULE}, session_key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        schedule_values(s, int),
    )


def save_schedule(conn: sqlite3.Connection, schedule: Schedule) -> Schedule:
    stored = get_schedule(conn, schedule.id)
    if stored is None:
        _insert(conn, schedule)
        return schedule
    if stored.kept_over(schedule):
        return stored
    conn.execute(
        "UPDATE schedules SET name = ?, kind = ?, spec = ?, text = ?, target_json = ?, session_key = ?,"
        " deliver_only = ?, next_fire_at = ?, meta_json = ? WHERE id = ?",
        schedule_definition(schedule, int),
    )
    found = get_schedule(conn, schedule.id)
    assert found is not None
    return found


def list_schedules(conn: sqlite3.Connection, session_key: str | None = None) -> list[Schedule]:
    if session_key is None:
        rows = conn.execute(f"SELECT {SCHEDULE} FROM schedules ORDER BY created_at, id").fetchall()
    else:
        rows = conn.execute(
            f"SELECT {SCHEDULE} FROM schedules WHERE session_key = ? ORDER BY created_at, id", (session_key,)
        ).fetchall()
    return [schedule_of(r) for r in rows]


def due_schedules(conn: sqlite3.Connection, now: float, limit: int) -> list[Schedule]:
    rows = conn.execute(
        f"SELECT {SCHEDULE} FROM schedules WHERE paused = 0 AND next_fire_at IS NOT NULL"
        " AND next_fire_at <= ? ORDER BY next_fire_at, id LIMIT ?",
        (now, limit),
    ).fetchall()
    return [schedule_of(r) for r in rows]


def next_schedule_at(conn: sqlite3.Connection) -> float | None:
    row = conn.execute(
        "SELECT MIN(next_fire_at) FROM schedules WHERE paused = 0 AND next_fire_at IS NOT NULL"
    ).fetchone()
    return None if row[0] is None else float(row[0])


def advance_schedule(
    conn: sqlite3.Connection, schedule_id: str, fired_at: float, next_fire_at: float | None
) -> bool:
    return (
        conn.execute(
            "UPDATE schedules SET next_fire_at = ?, last_fired_at = ?, fired = fired + 1"
            " WHERE id = ? AND next_fire_at = ?",
            (next_fire_at, fired_at, schedule_id, fired_at),
        ).rowcount
        == 1
    )


def pause_schedule(conn: sqlite3.Connection, schedule_id: str, paused: bool) -> bool:
    query = "UPDATE schedules SET paused = ? WHERE id = ?"
    return conn.execute(query, (int(paused), schedule_id)).rowcount == 1


def delete_schedule(conn: sqlite3.Connection, schedule_id: str) -> bool:
    return conn.execute("DELETE FROM schedules WHERE id = ?", (schedule_id,)).rowcount == 1


class SqliteSchedules(SqliteRole):
    """``Schedules``: each write commits before it returns."""

    save_schedule = writes(save_schedule)
    get_schedule = reads(get_schedule)
    list_schedules = reads(list_schedules)
    due_schedules = reads(due_schedules)
    next_schedule_at = reads(next_schedule_at)
    advance_schedule = writes(advance_schedule)
    pause_schedule = writes(pause_schedule)
    delete_schedule = writes(delete_schedule)
