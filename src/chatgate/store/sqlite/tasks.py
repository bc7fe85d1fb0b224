"""The tasks role over SQLite (``tasks`` table, schema v10), and the child-turn hook of ``complete_turn``.

``finish_tasks`` runs inside a child's turn commit: it marks the task done and, for a
delegated task, admits the completion into the parent's inbox in that same transaction. So a
completion is never acknowledged and then lost: it is in the parent's inbox exactly when the
child's answer is committed. The parent's ``session_id`` at dispatch decides the rule: the
same one (or the parent's session gone idle and still the same) gets the completion; a
different one means the user started over (``/new``), and the completion is dropped, with
the reason kept on the task.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from dataclasses import replace
from typing import Any

from chatgate.domain.background import (
    MAX_RESULT_CHARS,
    TASK_TRANSPORT,
    TaskRecord,
    completion_delivery_id,
    completion_text,
)
from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbound import Inbound
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.source import Source
from chatgate.store.sqlite.codec import dumps
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.inbox import admit

log = logging.getLogger(__name__)

_COLUMNS = (
    "id, kind, parent_key, parent_session_id, child_key, origin_json, prompt, created_at, status,"
    " result, finished_at, note"
)


def _row(row: tuple[Any, ...]) -> TaskRecord:
    tid, kind, parent, parent_sid, child, origin, prompt, created, status, result, finished, note = row
    return TaskRecord(
        tid, kind, parent, parent_sid, child, Source.from_dict(json.loads(origin)), prompt, created,
        status, result, finished, note,
    )  # fmt: skip


def get_task(conn: sqlite3.Connection, task_id: str) -> TaskRecord | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM tasks WHERE id = ?", (task_id,)).fetchone()
    return None if row is None else _row(row)


def start_task(conn: sqlite3.Connection, task: TaskRecord, first: AdmitRequest, now: float) -> bool:
    inserted = conn.execute(
        f"INSERT INTO tasks ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
        (
            task.id, task.kind, task.parent_key, task.parent_session_id, task.child_key,
            dumps(task.origin.to_dict()), task.prompt, task.created_at, task.status, None, None, None,
        ),
    ).rowcount  # fmt: skip
    if not inserted:
        return False
    admit(conn, first, now)
    return True


def list_tasks(conn: sqlite3.Connection, parent_key: str, limit: int) -> list[TaskRecord]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM tasks WHERE parent_key = ? ORDER BY created_at DESC, id DESC LIMIT ?",
        (parent_key, limit),
    ).fetchall()
    return [_row(r) for r in rows]


def _end(conn: sqlite3.Connection, task: TaskRecord, status: str, note: str, now: float) -> None:
    conn.execute(
        "UPDATE tasks SET status = ?, note = ?, finished_at = ? WHERE id = ? AND status = 'running'",
        (status, note[:200], now, task.id),
    )
    conn.execute(
        "UPDATE inbox SET status = 'cancelled', finished_at = ?, outcome = ?"
        " WHERE session_key = ? AND status = 'queued'",
        (now, f"{status}: {note}"[:80], task.child_key),
    )


def cancel_task(conn: sqlite3.Connection, task_id: str, note: str, now: float) -> TaskRecord | None:
    task = get_task(conn, task_id)
    if task is None or task.status != "running":
        return task
    _end(conn, task, "cancelled", note, now)
    return get_task(conn, task_id)


def close_stale_tasks(conn: sqlite3.Connection, before: float, note: str, now: float) -> list[TaskRecord]:
    """Running delegated tasks dispatched before the cutoff, and completions of such tasks still
    waiting in their parent's inbox: closed, so neither the child nor the parent runs them."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM tasks WHERE kind = 'delegate' AND status = 'running' AND created_at < ?",
        (before,),
    ).fetchall()
    closed = []
    for task in (_row(r) for r in rows):
        _end(conn, task, "closed", note, now)
        closed.append(replace(task, status="closed", note=note, finished_at=now))
    waiting = conn.execute(
        "SELECT seq, delivery_id FROM inbox WHERE transport = ? AND delivery_id LIKE 'task-done:%'"
        " AND status = 'queued' AND claimed_by IS NULL",
        (TASK_TRANSPORT,),
    ).fetchall()
    for seq, delivery_id in waiting:
        pending = get_task(conn, str(delivery_id).removeprefix("task-done:"))
        if pending is None or pending.created_at >= before:
            continue
        conn.execute(
            "UPDATE inbox SET status = 'cancelled', finished_at = ?, outcome = ? WHERE seq = ?",
            (now, f"closed: {note}"[:80], seq),
        )
        conn.execute("UPDATE tasks SET status = 'closed', note = ? WHERE id = ?", (note[:200], pending.id))
        closed.append(replace(pending, status="closed", note=note))
    return closed


def task_answer(transcript: tuple[HistoryEntry, ...], outcome: str) -> str:
    """A finished task's result text; the PostgreSQL backend uses it too, so the two never drift."""
    said = [e.content for e in transcript if e.role == "assistant"]
    text = said[-1] if said else f"(no answer: the task ended with {outcome})"
    return text if len(text) <= MAX_RESULT_CHARS else text[: MAX_RESULT_CHARS - 16] + " ... (cut)"


def finish_tasks(
    conn: sqlite3.Connection,
    seqs: tuple[int, ...],
    transcript: tuple[HistoryEntry, ...],
    outcome: str,
    now: float,
) -> list[TaskRecord]:
    """Inside a turn's commit: the tasks whose child input the turn answered are done; a
    delegated one's completion is admitted to its parent (or dropped after a ``/new``).
    Returns those tasks as they now are."""
    ended: list[TaskRecord] = []
    marks = ",".join("?" * len(seqs))
    rows = conn.execute(
        f"SELECT delivery_id, attempts FROM inbox WHERE transport = ? AND seq IN ({marks})",
        (TASK_TRANSPORT, *seqs),
    ).fetchall()
    for delivery_id, attempts in rows:
        task = get_task(conn, str(delivery_id).removeprefix("task:"))
        if task is None or task.status != "running":
            continue
        result = task_answer(transcript, outcome)
        conn.execute(
            "UPDATE tasks SET status = 'done', result = ?, finished_at = ? WHERE id = ?",
            (result, now, task.id),
        )
        if task.kind == "delegate":
            _deliver(conn, task, result, restored=int(attempts) > 1, now=now)
        ended.append(get_task(conn, task.id) or task)
    return ended


def log_finished_tasks(tasks: list[TaskRecord]) -> None:
    """One line per task a committed turn ended: a dropped completion is never silent."""
    for task in tasks:
        if task.status == "dropped":
            log.warning(
                "delegated task %s finished but its completion was dropped: %s (parent %s)",
                task.id,
                task.note,
                task.parent_key,
                extra={"session_key": task.parent_key},
            )
        else:
            log.info("task %s (%s) finished for %s", task.id, task.kind, task.parent_key)


def _deliver(conn: sqlite3.Connection, task: TaskRecord, result: str, *, restored: bool, now: float) -> None:
    row = conn.execute("SELECT session_id FROM sessions WHERE key = ?", (task.parent_key,)).fetchone()
    if row is not None and task.parent_session_id is not None and row[0] != task.parent_session_id:
        conn.execute(
            "UPDATE tasks SET status = 'dropped', note = ? WHERE id = ?",
            ("the parent session was reset (/new) after the dispatch; completion not delivered", task.id),
        )
        return
    inbound = Inbound(
        transport=TASK_TRANSPORT,
        delivery_id=completion_delivery_id(task.id),
        source=task.origin,
        text=completion_text(task, result, restored),
        received_at=now,
        payload={"task_completion": {"id": task.id, "restored": restored}},
        observes_labels=False,
    )
    admit(conn, AdmitRequest(inbound=inbound, session_key=task.parent_key), now)


class SqliteTasks(SqliteRole):
    """``Tasks``: each write commits before it returns."""

    async def start_task(self, task: TaskRecord, first: AdmitRequest) -> bool:
        now = time.time()
        return await self._db.write(lambda c: start_task(c, task, first, now))

    async def get_task(self, task_id: str) -> TaskRecord | None:
        return await self._db.read(lambda c: get_task(c, task_id))

    async def list_tasks(self, parent_key: str, limit: int = 20) -> list[TaskRecord]:
        return await self._db.read(lambda c: list_tasks(c, parent_key, limit))

    async def cancel_task(self, task_id: str, note: str) -> TaskRecord | None:
        now = time.time()
        return await self._db.write(lambda c: cancel_task(c, task_id, note, now))

    async def close_stale_tasks(self, created_before: float, note: str) -> list[TaskRecord]:
        now = time.time()
        return await self._db.write(lambda c: close_stale_tasks(c, created_before, note, now))
