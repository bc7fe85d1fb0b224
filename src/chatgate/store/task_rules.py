"""The task rules, once for both backends: a task and its child's first event, a child's turn
that ends its task (and hands a delegated result to the parent), a cancel, and the closing of
stale delegations.

``finish_tasks`` runs inside a child's turn commit: it marks the task done and, for a
delegated task, admits the completion into the parent's inbox in that same transaction. So a
completion is never acknowledged and then lost: it is in the parent's inbox exactly when the
child's answer is committed. The parent's ``session_id`` at dispatch decides: the same one
(or no parent session any more) gets the completion; a different one means the user started
over (``/new``), and the completion is dropped, with the reason kept on the task.

Each rule runs inside one transaction over ``TaskStatements``; PostgreSQL locks the child's
session and then the task (the order a turn commit takes them), so a cancel on one process
and the child's commit on another end a task once.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod

from msgspec.structs import replace

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

log = logging.getLogger(__name__)

DROPPED = "the parent session was reset (/new) after the dispatch; completion not delivered"


class TaskStatements(ABC):
    """A backend's task statements, on the connection of the transaction the rule runs in."""

    @abstractmethod
    async def insert(self, task: TaskRecord) -> bool:
        """Record a new task; False when its id exists."""

    @abstractmethod
    async def task(self, task_id: str, *, lock: bool = False) -> TaskRecord | None: ...

    @abstractmethod
    async def lock_children(self, child_keys: list[str]) -> None:
        """Before ending tasks: their child sessions, in the order a turn commit locks them."""

    @abstractmethod
    async def end(self, task: TaskRecord, status: str, note: str, now: float) -> None:
        """End a running task and cancel what waits in its child's inbox."""

    @abstractmethod
    async def stale_delegates(self, before: float) -> list[TaskRecord]:
        """Running delegated tasks dispatched before ``before`` (their children locked first)."""

    @abstractmethod
    async def waiting_completions(self, before: float) -> list[tuple[int, str]]:
        """(inbox seq, task id) of completions of tasks dispatched before ``before`` that no turn took."""

    @abstractmethod
    async def close_completion(self, seq: int, task_id: str, note: str, now: float) -> None: ...

    @abstractmethod
    async def answered_inputs(self, seqs: tuple[int, ...]) -> list[tuple[str, int]]:
        """(task id, attempts) of the task inputs among ``seqs``, in admission order."""

    @abstractmethod
    async def set_done(self, task_id: str, result: str, now: float) -> None: ...

    @abstractmethod
    async def parent_session_id(self, parent_key: str) -> str | None:
        """The parent session's current conversation; None without a parent session."""

    @abstractmethod
    async def drop(self, task_id: str, note: str) -> None: ...

    @abstractmethod
    async def admit_for(self, parent_key: str, request: AdmitRequest, now: float) -> None:
        """Admit ``request`` in this transaction, for the chat of the task's parent."""


async def start_task(sql: TaskStatements, task: TaskRecord, first: AdmitRequest, now: float) -> bool:
    """The task and its child's first event, once per id."""
    if not await sql.insert(task):
        return False
    await sql.admit_for(task.parent_key, first, now)
    return True


async def cancel_task(sql: TaskStatements, task_id: str, note: str, now: float) -> TaskRecord | None:
    seen = await sql.task(task_id)
    if seen is None or seen.status != "running":
        return seen
    await sql.lock_children([seen.child_key])
    task = await sql.task(task_id, lock=True)
    if task is None or task.status != "running":
        return task
    await sql.end(task, "cancelled", note, now)
    return await sql.task(task_id)


async def close_stale_tasks(sql: TaskStatements, before: float, note: str, now: float) -> list[TaskRecord]:
    """Running delegated tasks dispatched before the cutoff, and completions of such tasks still
    waiting in their parent's inbox: closed, so neither the child nor the parent runs them."""
    closed = []
    for task in await sql.stale_delegates(before):
        await sql.end(task, "closed", note, now)
        closed.append(replace(task, status="closed", note=note, finished_at=now))
    for seq, task_id in await sql.waiting_completions(before):
        pending = await sql.task(task_id)
        await sql.close_completion(seq, task_id, note, now)
        if pending is not None:
            closed.append(replace(pending, status="closed", note=note))
    return closed


def task_answer(transcript: tuple[HistoryEntry, ...], outcome: str) -> str:
    """A finished task's result text: the child's last answer, cut to ``MAX_RESULT_CHARS``."""
    said = [e.content for e in transcript if e.role == "assistant"]
    text = said[-1] if said else f"(no answer: the task ended with {outcome})"
    return text if len(text) <= MAX_RESULT_CHARS else text[: MAX_RESULT_CHARS - 16] + " ... (cut)"


async def finish_tasks(
    sql: TaskStatements,
    seqs: tuple[int, ...],
    transcript: tuple[HistoryEntry, ...],
    outcome: str,
    now: float,
) -> list[TaskRecord]:
    """Inside a turn's commit: the tasks whose child input the turn answered are done; a
    delegated one's completion is admitted to its parent (or dropped after a ``/new``).
    Returns those tasks as they now are."""
    ended: list[TaskRecord] = []
    for task_id, attempts in await sql.answered_inputs(seqs):
        task = await sql.task(task_id, lock=True)
        if task is None or task.status != "running":
            continue
        result = task_answer(transcript, outcome)
        await sql.set_done(task.id, result, now)
        if task.kind == "delegate":
            await _deliver(sql, task, result, restored=attempts > 1, now=now)
        ended.append(await sql.task(task.id) or task)
    return ended


async def _deliver(sql: TaskStatements, task: TaskRecord, result: str, *, restored: bool, now: float) -> None:
    current = await sql.parent_session_id(task.parent_key)
    if current is not None and task.parent_session_id is not None and current != task.parent_session_id:
        await sql.drop(task.id, DROPPED)
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
    await sql.admit_for(task.parent_key, AdmitRequest(inbound=inbound, session_key=task.parent_key), now)


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
