"""The tasks role over PostgreSQL (``tasks`` table, schema v2): its statements; the rules, and
the child-turn hook of ``complete_turn`` (``finish_tasks``), are ``store.task_rules``.

Across a fleet, a task row is locked (``FOR UPDATE``) by whoever ends it, after the child's
session row (the order ``complete_turn`` takes them), so a cancel on one process and the
child's commit on another end it once. The admissions a task makes (its child's input, its
completion) keep the parent's chat where it is reachable: they are admitted under the parent
session's ``route_holder``, not under the process that made them.
"""

from __future__ import annotations

import time

import asyncpg

from chatgate.domain.background import TASK_TRANSPORT, TaskRecord
from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbox import AdmitRequest
from chatgate.store import task_rules as rules
from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.forwards import reads
from chatgate.store.postgres.inbox import admit
from chatgate.store.postgres.sql import rowcount
from chatgate.store.rows import TASK, new_task_values, task_of

_STALE = "FROM tasks WHERE kind = 'delegate' AND status = 'running' AND created_at < $1"


class TaskSql(rules.TaskStatements):
    """``TaskStatements`` on the connection of one transaction; ``holder`` is this store instance."""

    def __init__(self, conn: asyncpg.Connection, holder: str) -> None:
        self._c = conn
        self._holder = holder

    async def insert(self, task: TaskRecord) -> bool:
        inserted = await self._c.execute(
            f"INSERT INTO tasks ({TASK}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,NULL,NULL,NULL)"
            " ON CONFLICT DO NOTHING",
            *new_task_values(task),
        )
        return bool(rowcount(inserted))

    async def task(self, task_id: str, *, lock: bool = False) -> TaskRecord | None:
        return await get_task(self._c, task_id, lock)

    async def lock_children(self, child_keys: list[str]) -> None:
        """A turn of a child that is committing finishes first, and one that commits after this
        sees its items cancelled (``LeaseLost``), as under SQLite's one writer."""
        await self._c.execute(
            "SELECT 1 FROM sessions WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE", child_keys
        )

    async def end(self, task: TaskRecord, status: str, note: str, now: float) -> None:
        await self._c.execute(
            "UPDATE tasks SET status = $1, note = $2, finished_at = $3 WHERE id = $4 AND status = 'running'",
            *(status, note[:200], now, task.id),
        )
        await self._c.execute(
            "UPDATE inbox SET status = 'cancelled', finished_at = $1, outcome = $2"
            " WHERE session_key = $3 AND status = 'queued'",
            *(now, f"{status}: {note}"[:80], task.child_key),
        )

    async def stale_delegates(self, before: float) -> list[TaskRecord]:
        children = await self._c.fetch(f"SELECT child_key {_STALE}", before)
        await self.lock_children([r[0] for r in children])
        rows = await self._c.fetch(f"SELECT {TASK} {_STALE} ORDER BY id FOR UPDATE", before)
        return [task_of(r) for r in rows]

    async def waiting_completions(self, before: float) -> list[tuple[int, str]]:
        rows = await self._c.fetch(
            "SELECT i.seq, t.id FROM inbox i JOIN tasks t ON i.delivery_id = 'task-done:' || t.id"
            " WHERE i.transport = $1 AND i.status = 'queued' AND i.claimed_by IS NULL AND t.created_at < $2"
            " ORDER BY i.seq FOR UPDATE OF i, t",
            TASK_TRANSPORT,
            before,
        )
        return [(int(r[0]), str(r[1])) for r in rows]

    async def close_completion(self, seq: int, task_id: str, note: str, now: float) -> None:
        await self._c.execute(
            "UPDATE inbox SET status = 'cancelled', finished_at = $1, outcome = $2 WHERE seq = $3",
            *(now, f"closed: {note}"[:80], seq),
        )
        await self._c.execute(
            "UPDATE tasks SET status = 'closed', note = $1 WHERE id = $2", note[:200], task_id
        )

    async def answered_inputs(self, seqs: tuple[int, ...]) -> list[tuple[str, int]]:
        rows = await self._c.fetch(
            "SELECT delivery_id, attempts FROM inbox WHERE transport = $1 AND seq = ANY($2::bigint[])"
            " ORDER BY seq",
            TASK_TRANSPORT,
            list(seqs),
        )
        return [(str(r[0]).removeprefix("task:"), int(r[1])) for r in rows]

    async def set_done(self, task_id: str, result: str, now: float) -> None:
        await self._c.execute(
            "UPDATE tasks SET status = 'done', result = $1, finished_at = $2 WHERE id = $3",
            result,
            now,
            task_id,
        )

    async def parent_session_id(self, parent_key: str) -> str | None:
        found = await self._c.fetchval("SELECT session_id FROM sessions WHERE key = $1", parent_key)
        return None if found is None else str(found)

    async def drop(self, task_id: str, note: str) -> None:
        await self._c.execute("UPDATE tasks SET status = 'dropped', note = $1 WHERE id = $2", note, task_id)

    async def admit_for(self, parent_key: str, request: AdmitRequest, now: float) -> None:
        """Under the parent session's route (this instance's when it has none yet)."""
        route = await self._c.fetchval("SELECT route_holder FROM sessions WHERE key = $1", parent_key)
        await admit(self._c, request, now, self._holder if route is None else str(route))


async def get_task(conn: asyncpg.Connection, task_id: str, lock: bool = False) -> TaskRecord | None:
    query = f"SELECT {TASK} FROM tasks WHERE id = $1" + (" FOR UPDATE" if lock else "")
    row = await conn.fetchrow(query, task_id)
    return None if row is None else task_of(row)


async def list_tasks(conn: asyncpg.Connection, parent_key: str, limit: int = 20) -> list[TaskRecord]:
    rows = await conn.fetch(
        f"SELECT {TASK} FROM tasks WHERE parent_key = $1 ORDER BY created_at DESC, id DESC LIMIT $2",
        parent_key,
        limit,
    )
    return [task_of(r) for r in rows]


async def finish_tasks(
    conn: asyncpg.Connection,
    seqs: tuple[int, ...],
    transcript: tuple[HistoryEntry, ...],
    outcome: str,
    now: float,
    holder: str,
) -> list[TaskRecord]:
    """``task_rules.finish_tasks`` inside a child's turn commit (``leases.complete_turn``)."""
    return await rules.finish_tasks(TaskSql(conn, holder), seqs, transcript, outcome, now)


class PgTasks(PgRole):
    """``Tasks``: each write is one transaction, committed before it returns."""

    async def start_task(self, task: TaskRecord, first: AdmitRequest) -> bool:
        now, holder = time.time(), self._db.holder
        return await self._db.write(lambda c: rules.start_task(TaskSql(c, holder), task, first, now))

    async def get_task(self, task_id: str) -> TaskRecord | None:
        return await self._db.read(lambda c: get_task(c, task_id))

    list_tasks = reads(list_tasks)

    async def cancel_task(self, task_id: str, note: str) -> TaskRecord | None:
        now, holder = time.time(), self._db.holder
        return await self._db.write(lambda c: rules.cancel_task(TaskSql(c, holder), task_id, note, now))

    async def close_stale_tasks(self, created_before: float, note: str) -> list[TaskRecord]:
        now, holder = time.time(), self._db.holder
        return await self._db.write(
            lambda c: rules.close_stale_tasks(TaskSql(c, holder), created_before, note, now)
        )
