"""The tasks role over PostgreSQL (``tasks`` table, schema v2), and the child-turn hook of ``complete_turn``.

The rules are SQLite's (``store.sqlite.tasks``): ``finish_tasks`` runs inside the child's
turn commit, marks the task done and, for a delegated task, admits the completion into the
parent's inbox in that same transaction, unless the parent's ``session_id`` changed since the
dispatch (a ``/new``), when the completion is dropped with the reason kept on the task.

Across a fleet, a task row is locked (``FOR UPDATE``) by whoever ends it, so a cancel on one
process and the child's commit on another end it once. The admissions a task makes (its
child's input, its completion) keep the parent's chat where it is reachable: they are
admitted under the parent session's ``route_holder``, not under the process that made them.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

import asyncpg

from chatgate.domain.background import TASK_TRANSPORT, TaskRecord, completion_delivery_id, completion_text
from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbound import Inbound
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.source import Source
from chatgate.store.postgres.database import PgRole, rowcount
from chatgate.store.postgres.inbox import admit
from chatgate.store.sqlite.codec import dumps
from chatgate.store.sqlite.tasks import log_finished_tasks
from chatgate.store.sqlite.tasks import task_answer as answer_of

__all__ = ["PgTasks", "finish_tasks", "log_finished_tasks"]

_COLUMNS = (
    "id, kind, parent_key, parent_session_id, child_key, origin_json, prompt, created_at, status,"
    " result, finished_at, note"
)
_DROPPED = "the parent session was reset (/new) after the dispatch; completion not delivered"


def _row(row: asyncpg.Record) -> TaskRecord:
    tid, kind, parent, parent_sid, child, origin, prompt, created, status, result, finished, note = row
    return TaskRecord(
        tid, kind, parent, parent_sid, child, Source.from_dict(json.loads(origin)), prompt, created,
        status, result, finished, note,
    )  # fmt: skip


async def get_task(conn: asyncpg.Connection, task_id: str, lock: bool = False) -> TaskRecord | None:
    query = f"SELECT {_COLUMNS} FROM tasks WHERE id = $1" + (" FOR UPDATE" if lock else "")
    row = await conn.fetchrow(query, task_id)
    return None if row is None else _row(row)


async def _route_of(conn: asyncpg.Connection, parent_key: str, holder: str) -> str:
    """The process the parent's chat is reachable through (``holder`` when it has none yet)."""
    route = await conn.fetchval("SELECT route_holder FROM sessions WHERE key = $1", parent_key)
    return holder if route is None else str(route)


async def start_task(
    conn: asyncpg.Connection, task: TaskRecord, first: AdmitRequest, now: float, holder: str
) -> bool:
    inserted = await conn.execute(
        f"INSERT INTO tasks ({_COLUMNS}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,NULL,NULL,NULL)"
        " ON CONFLICT DO NOTHING",
        task.id, task.kind, task.parent_key, task.parent_session_id, task.child_key,
        dumps(task.origin.to_dict()), task.prompt, task.created_at, task.status,
    )  # fmt: skip
    if not rowcount(inserted):
        return False
    await admit(conn, first, now, await _route_of(conn, task.parent_key, holder))
    return True


async def list_tasks(conn: asyncpg.Connection, parent_key: str, limit: int) -> list[TaskRecord]:
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM tasks WHERE parent_key = $1 ORDER BY created_at DESC, id DESC LIMIT $2",
        parent_key,
        limit,
    )
    return [_row(r) for r in rows]


async def _end(conn: asyncpg.Connection, task: TaskRecord, status: str, note: str, now: float) -> None:
    await conn.execute(
        "UPDATE tasks SET status = $1, note = $2, finished_at = $3 WHERE id = $4 AND status = 'running'",
        status,
        note[:200],
        now,
        task.id,
    )
    await conn.execute(
        "UPDATE inbox SET status = 'cancelled', finished_at = $1, outcome = $2"
        " WHERE session_key = $3 AND status = 'queued'",
        now,
        f"{status}: {note}"[:80],
        task.child_key,
    )


async def _lock_children(conn: asyncpg.Connection, child_keys: list[str]) -> None:
    """Lock the child sessions before their tasks, in the order ``complete_turn`` takes them
    (session, then task): a turn of the child that is committing finishes first, and one that
    commits after this sees its items cancelled (``LeaseLost``), as under SQLite's one writer."""
    await conn.execute(
        "SELECT 1 FROM sessions WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE", child_keys
    )


async def cancel_task(conn: asyncpg.Connection, task_id: str, note: str, now: float) -> TaskRecord | None:
    seen = await get_task(conn, task_id)
    if seen is None or seen.status != "running":
        return seen
    await _lock_children(conn, [seen.child_key])
    task = await get_task(conn, task_id, lock=True)
    if task is None or task.status != "running":
        return task
    await _end(conn, task, "cancelled", note, now)
    return await get_task(conn, task_id)


async def close_stale_tasks(
    conn: asyncpg.Connection, before: float, note: str, now: float
) -> list[TaskRecord]:
    """Running delegated tasks dispatched before the cutoff, and completions of such tasks still
    waiting in their parent's inbox: closed, so neither the child nor the parent runs them."""
    stale = "FROM tasks WHERE kind = 'delegate' AND status = 'running' AND created_at < $1"
    children = await conn.fetch(f"SELECT child_key {stale}", before)
    await _lock_children(conn, [r[0] for r in children])
    rows = await conn.fetch(f"SELECT {_COLUMNS} {stale} ORDER BY id FOR UPDATE", before)
    closed = []
    for task in (_row(r) for r in rows):
        await _end(conn, task, "closed", note, now)
        closed.append(replace(task, status="closed", note=note, finished_at=now))
    waiting = await conn.fetch(
        "SELECT i.seq, t.id FROM inbox i JOIN tasks t ON i.delivery_id = 'task-done:' || t.id"
        " WHERE i.transport = $1 AND i.status = 'queued' AND i.claimed_by IS NULL AND t.created_at < $2"
        " ORDER BY i.seq FOR UPDATE OF i, t",
        TASK_TRANSPORT,
        before,
    )
    for seq, task_id in waiting:
        await conn.execute(
            "UPDATE inbox SET status = 'cancelled', finished_at = $1, outcome = $2 WHERE seq = $3",
            now,
            f"closed: {note}"[:80],
            seq,
        )
        pending = await get_task(conn, task_id)
        await conn.execute("UPDATE tasks SET status = 'closed', note = $1 WHERE id = $2", note[:200], task_id)
        if pending is not None:
            closed.append(replace(pending, status="closed", note=note))
    return closed


async def finish_tasks(
    conn: asyncpg.Connection,
    seqs: tuple[int, ...],
    transcript: tuple[HistoryEntry, ...],
    outcome: str,
    now: float,
    holder: str,
) -> list[TaskRecord]:
    """Inside a turn's commit: the tasks whose child input the turn answered are done; a
    delegated one's completion is admitted to its parent (or dropped after a ``/new``).
    Returns those tasks as they now are."""
    ended: list[TaskRecord] = []
    rows = await conn.fetch(
        "SELECT delivery_id, attempts FROM inbox WHERE transport = $1 AND seq = ANY($2::bigint[])"
        " ORDER BY seq",
        TASK_TRANSPORT,
        list(seqs),
    )
    for delivery_id, attempts in rows:
        task = await get_task(conn, str(delivery_id).removeprefix("task:"), lock=True)
        if task is None or task.status != "running":
            continue
        result = answer_of(transcript, outcome)
        await conn.execute(
            "UPDATE tasks SET status = 'done', result = $1, finished_at = $2 WHERE id = $3",
            result,
            now,
            task.id,
        )
        if task.kind == "delegate":
            await _deliver(conn, task, result, restored=int(attempts) > 1, now=now, holder=holder)
        ended.append(await get_task(conn, task.id) or task)
    return ended


async def _deliver(
    conn: asyncpg.Connection, task: TaskRecord, result: str, *, restored: bool, now: float, holder: str
) -> None:
    parent = await conn.fetchrow(
        "SELECT session_id, route_holder FROM sessions WHERE key = $1", task.parent_key
    )
    if parent is not None and task.parent_session_id is not None and parent[0] != task.parent_session_id:
        await conn.execute("UPDATE tasks SET status = 'dropped', note = $1 WHERE id = $2", _DROPPED, task.id)
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
    route = holder if parent is None or parent[1] is None else str(parent[1])
    await admit(conn, AdmitRequest(inbound=inbound, session_key=task.parent_key), now, route)


class PgTasks(PgRole):
    """``Tasks``: each write is one transaction, committed before it returns."""

    async def start_task(self, task: TaskRecord, first: AdmitRequest) -> bool:
        now, holder = time.time(), self._db.holder
        return await self._db.write(lambda c: start_task(c, task, first, now, holder))

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
