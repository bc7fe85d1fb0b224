"""Background tasks and delegated sub-agents: a task is a child session's inbox event, recorded
with where it came from, so its result can be routed after any restart.

- ``bg``: ``/bg <prompt>`` in a chat; the child's answer is posted to the chat like a reply.
- ``delegate``: an agent's ``delegate`` tool call; the child's answer comes back to the parent
  session as an inbox event (``task-done:<id>``), admitted in the same transaction as the
  child's turn, unless the parent was reset (``/new``) since the dispatch: then it is dropped
  and the task says so. A completion still pending past ``max_age`` at a restart is closed.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from chatgate.domain.source import Source

TaskKind = Literal["bg", "delegate"]
TaskStatus = Literal["running", "done", "cancelled", "dropped", "closed"]

TASK_TRANSPORT = "task"
"""The transport of a task's own events: ``task:<id>`` (the child's input) and
``task-done:<id>`` (a delegated child's completion in its parent's inbox)."""

MAX_TASKS_LISTED = 20
MAX_RESULT_CHARS = 16_000
"""A delegated child's answer as its parent receives it (longer answers are cut)."""


def child_delivery_id(task_id: str) -> str:
    return f"task:{task_id}"


def completion_delivery_id(task_id: str) -> str:
    return f"task-done:{task_id}"


def child_session_key(parent_key: str, task_id: str) -> str:
    """A child session of its own: the parent's history is not the child's."""
    return f"{parent_key}:task:{task_id}"


def may_be_child_session(session_key: str) -> bool:
    """False only for a key no task's child session can have (every child's has ``:task:``):
    a turn of such a session ends no task, so its commit need not look for one."""
    return ":task:" in session_key


class TaskRecord(msgspec.Struct, frozen=True):
    id: str
    kind: TaskKind
    parent_key: str
    parent_session_id: str | None
    """The parent's ``session_id`` at dispatch: a different one at completion means a ``/new``."""
    child_key: str
    origin: Source
    """Where the task was asked for (platform, scope, chat, user): the route of its result."""
    prompt: str
    created_at: float
    status: TaskStatus = "running"
    result: str | None = None
    finished_at: float | None = None
    note: str | None = None
    """Why a task ended other than ``done`` (cancelled by whom, dropped or closed because...)."""


RESTORED_MARK = " (restored after a gateway restart)"


def completion_text(task: TaskRecord, result: str, restored: bool) -> str:
    """What the parent agent reads when a delegated child finishes."""
    mark = RESTORED_MARK if restored else ""
    return f"[delegated task {task.id} finished{mark}]\nTask: {task.prompt}\nResult: {result}"


def as_restored(text: str) -> str:
    """A completion's text marked restored (it waited in the inbox across a restart), once."""
    head, sep, rest = text.partition(" finished]")
    if not sep or RESTORED_MARK in head:
        return text
    return f"{head} finished{RESTORED_MARK}]{rest}"
