"""The tasks role over SQLite (``tasks`` table, schema v10): its statements; the rules, and the
child-turn hook of ``complete_turn`` (``finish_tasks``), are ``store.task_rules``."""

from __future__ import annotations

import sqlite3
import time

from chatgate.domain.background import TASK_TRANSPORT, TaskRecord
from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbox import AdmitRequest
from chatgate.store import task_rules as rules
from chatgate.store.inline import run_inline
from chatgate.store.rows import TASK, new_task_values, task_of
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads
from chatgate.store.sqlite.inbox import admit
from chatgate.store.sqlite.plans import QUEUED_ROWS


class TaskSql(rules.TaskStatements):
    """``TaskStatements`` on one connection (each completes at once: see ``run_inline``). The one
    writer runs a rule alone, so nothing is locked."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._c = conn

    async def insert(self, task: TaskRecord) -> bool:
        inserted = self._c.execute(
            f"INSERT INTO tasks ({TASK}) VALUES (?,?,?,?,?,?,?,?,?,NULL,NULL,NULL) ON CONFLICT DO NOTHING",
            new_task_values(task),
        ).rowcount
        return bool(inserted)

    async def task(self, task_id: str, *, lock: bool = False) -> TaskRecord | None:
        return get_task(self._c, task_id)

    async def lock_children(self, child_keys: list[str]) -> None:
        """Nothing to lock: the one writer runs this transaction alone."""

    async def end(self, task: TaskRecord, status: str, note: str, now: float) -> None:
        self._c.execute(
            "UPDATE tasks SET status = ?, note = ?, finished_at = ? WHERE id = ? AND status = 'running'",
            (status, note[:200], now, task.id),
        )
        self._c.execute(
            f"UPDATE inbox {QUEUED_ROWS} SET status = 'cancelled', finished_at = ?, outcome = ?"
            " WHERE session_key = ? AND status = 'queued'",
            (now, f"{status}: {note}"[:80], task.child_key),
        )

    async def stale_delegates(self, before: float) -> list[TaskRecord]:
        rows = self._c.execute(
            f"SELECT {TASK} FROM tasks WHERE kind = 'delegate' AND status = 'running' AND created_at < ?",
            (before,),
        ).fetchall()
        return [task_of(r) for r in rows]

    async def waiting_completions(self, before: float) -> list[tuple[int, str]]:
        rows = self._c.execute(
            "SELECT i.seq, t.id FROM inbox i JOIN tasks t ON i.delivery_id = 'task-done:' || t.id"
            " WHERE i.transport = ? AND i.status = 'queued' AND i.claimed_by IS NULL AND t.created_at < ?"
            " ORDER BY i.seq",
            (TASK_TRANSPORT, before),
        ).fetchall()
        return [(int(r[0]), str(r[1])) for r in rows]

    async def close_completion(self, seq: int, task_id: str, note: str, now: float) -> None:
        self._c.execute(
            "UPDATE inbox SET status = 'cancelled', finished_at = ?, outcome = ? WHERE seq = ?",
            (now, f"closed: {note}"[:80], seq),
        )
        self._c.execute("UPDATE tasks SET status = 'closed', note = ? WHERE id = ?", (note[:200], task_id))

    async def answered_inputs(self, seqs: tuple[int, ...]) -> list[tuple[str, int]]:
        marks = ",".join("?" * len(seqs))
        rows = self._c.execute(
            f"SELECT delivery_id, attempts FROM inbox WHERE transport = ? AND seq IN ({marks}) ORDER BY seq",
            (TASK_TRANSPORT, *seqs),
        ).fetchall()
        return [(str(r[0]).removeprefix("task:"), int(r[1])) for r in rows]

    async def set_done(self, task_id: str, result: str, now: float) -> None:
        self._c.execute(
            "UPDATE tasks SET status = 'done', result = ?, finished_at = ? WHERE id = ?",
            (result, now, task_id),
        )

    async def parent_session_id(self, parent_key: str) -> str | None:
        row = self._c.execute("SELECT session_id FROM sessions WHERE key = ?", (parent_key,)).fetchone()
        return None if row is None else str(row[0])

    async def drop(self, task_id: str, note: str) -> None:
        self._c.execute("UPDATE tasks SET status = 'dropped', note = ? WHERE id = ?", (note, task_id))

    async def admit_for(self, parent_key: str, request: AdmitRequest, now: float) -> None:
        admit(self._c, request, now)


def get_task(conn: sqlite3.Connection, task_id: str) -> TaskRecord | None:
    row = conn.execute(f"SELECT {TASK} FROM tasks WHERE id = ?", (task_id,)).fetchone()
    return None if row is None else task_of(row)


def list_tasks(conn: sqlite3.Connection, parent_key: str, limit: int = 20) -> list[TaskRecord]:
    rows = conn.execute(
        f"SELECT {TASK} FROM tasks WHERE parent_key = ? ORDER BY created_at DESC, id DESC LIMIT ?",
        (parent_key, limit),
    ).fetchall()
    return [task_of(r) for r in rows]


def finish_tasks(
    conn: sqlite3.Connection,
    seqs: tuple[int, ...],
    transcript: tuple[HistoryEntry, ...],
    outcome: str,
    now: float,
) -> list[TaskRecord]:
    """``task_rules.finish_tasks`` inside a child's turn commit (``leases.complete_turn``)."""
    return run_inline(rules.finish_tasks(TaskSql(conn), seqs, transcript, outcome, now))


class SqliteTasks(SqliteRole):
    """``Tasks``: each write commits before it returns."""

    async def start_task(self, task: TaskRecord, first: AdmitRequest) -> bool:
        now = time.time()
        return await self._db.write(lambda c: run_inline(rules.start_task(TaskSql(c), task, first, now)))

    get_task = reads(get_task)
    list_tasks = reads(list_tasks)

    async def cancel_task(self, task_id: str, note: str) -> TaskRecord | None:
        now = time.time()
        return await self._db.write(lambda c: run_inline(rules.cancel_task(TaskSql(c), task_id, note, now)))

    async def close_stale_tasks(self, created_before: float, note: str) -> list[TaskRecord]:
        now = time.time()
        return await self._db.write(
            lambda c: run_inline(rules.close_stale_tasks(TaskSql(c), created_before, note, now))
        )
