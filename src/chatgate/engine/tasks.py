"""Background tasks (``/bg``, ``/tasks``, ``/cancel``) and the agent's ``delegate`` tool.

Either way a task is a child session of its own (``<parent key>:task:<id>``) whose first
inbox event is committed with the task's record, so it runs like any turn: in order, under
a lease, resumed after a crash or given up with a notice. A ``bg`` child answers into the
chat it was asked in; a ``delegate`` child's answer goes to its parent session's inbox
(``store.task_rules.finish_tasks``), never to the chat.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import msgspec

from chatgate.agents.base import ToolCall, ToolResult, ToolRunner
from chatgate.domain.background import (
    MAX_TASKS_LISTED,
    TASK_TRANSPORT,
    TaskKind,
    TaskRecord,
    child_delivery_id,
    child_session_key,
)
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.inbound import MAX_TEXT_CHARS, Inbound
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.source import Source
from chatgate.domain.store_roles import Tasks, Transcript
from chatgate.engine.approvals.policy import ToolContext

log = logging.getLogger(__name__)

DELEGATE_TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "delegate",
        "description": (
            "Hand a self-contained task to a sub-agent that works on it in the background, in a"
            " conversation of its own. Its result arrives later as a new message in this conversation."
        ),
        "parameters": {
            "type": "object",
            "properties": {"task": {"type": "string", "description": "What the sub-agent should do."}},
            "required": ["task"],
        },
    },
}


class TaskStore(Tasks, Transcript, Protocol):
    """Tasks, and the parent's ``session_id`` at dispatch (to tell a ``/new`` afterwards)."""


class TaskSettings(msgspec.Struct, frozen=True):
    max_running_per_session: int = 10
    """Tasks one session may have running: a bound on what a user or a model can start."""
    delegation: bool = False
    """Offer the agent the ``delegate`` tool."""
    max_age_hours: float = 48.0
    """A delegated task still running this long after its dispatch is closed at start-up."""
    commands: bool = True
    """``/bg``, ``/tasks`` and ``/cancel`` in chats."""


def task_id(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:8]


class BackgroundTasks:
    """Starts, lists and cancels tasks; ``on_queued`` wakes the scheduler for a child session."""

    def __init__(
        self,
        store: TaskStore,
        on_queued: Callable[[str], None],
        stop_session: Callable[[str], Awaitable[None]],
        settings: TaskSettings = TaskSettings(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._on_queued = on_queued
        self._stop_session = stop_session
        self.settings = settings
        self._clock = clock

    async def start(
        self, kind: TaskKind, seed: str, parent_key: str, origin: Source, prompt: str, reply_to: str | None
    ) -> TaskRecord:
        """Start a task (once per ``seed``: a redelivered command or tool call starts nothing new).

        Raises ``ValueError`` with what to tell the requester when it may not start."""
        prompt = prompt.strip()
        if not prompt:
            raise ValueError("say what the task is, e.g. /bg summarize the last release notes")
        if len(prompt) > MAX_TEXT_CHARS:
            raise ValueError(f"the task is {len(prompt)} characters; the limit is {MAX_TEXT_CHARS}")
        tid = task_id(seed)
        existing = await self._store.get_task(tid)
        if existing is not None:
            return existing
        running = [t for t in await self._store.list_tasks(parent_key, 100) if t.status == "running"]
        if len(running) >= self.settings.max_running_per_session:
            raise ValueError(f"{len(running)} tasks are running here already; /cancel one or wait")
        info = await self._store.session_info(parent_key)
        now = self._clock()
        child = child_session_key(parent_key, tid)
        task = TaskRecord(
            tid, kind, parent_key, info.session_id if info else None, child, origin, prompt, now
        )
        first = Inbound(
            transport=TASK_TRANSPORT,
            delivery_id=child_delivery_id(tid),
            source=origin,
            text=prompt,
            message_ref=reply_to,
            received_at=now,
            payload={"task": {"id": tid, "kind": kind, "parent": parent_key}},
            observes_labels=False,
        )
        if await self._store.start_task(task, AdmitRequest(inbound=first, session_key=child)):
            log.info("task %s (%s) started for %s", tid, kind, parent_key)
            self._on_queued(child)
        found = await self._store.get_task(tid)
        return found or task

    async def cancel(self, parent_key: str, tid: str, by: str) -> str:
        task = await self._store.get_task(tid)
        if task is None or task.parent_key != parent_key:
            return f"No task {tid!r} here; /tasks lists this chat's tasks."
        if task.status != "running":
            return f"Task {tid} has ended already ({task.status})."
        await self._store.cancel_task(tid, f"cancelled by {by}")
        await self._stop_session(task.child_key)
        return f"Cancelled task {tid}."

    async def close_stale(self) -> list[TaskRecord]:
        """At start-up: delegated tasks older than ``max_age_hours`` are closed, never re-run."""
        cutoff = self._clock() - self.settings.max_age_hours * 3600
        closed = await self._store.close_stale_tasks(
            cutoff, "older than delegation.max_age_hours at a restart"
        )
        for task in closed:
            log.warning(
                "delegated task %s of %s closed at start-up: dispatched over %gh ago, not re-run",
                task.id,
                task.parent_key,
                self.settings.max_age_hours,
            )
        return closed

    # ------------------------------------------------------------ chat commands

    async def bg(self, inbound: Inbound, key: str, args: str) -> str:
        try:
            seed = f"bg\0{inbound.transport}\0{inbound.delivery_id}"
            task = await self.start("bg", seed, key, inbound.source, args, inbound.message_ref)
        except ValueError as exc:
            return f"Not started: {exc}."
        return (
            f"Started task {task.id}; its answer will be posted here."
            f" /tasks lists tasks, /cancel {task.id} stops it."
        )

    async def list(self, inbound: Inbound, key: str, args: str) -> str:
        tasks = await self._store.list_tasks(key, MAX_TASKS_LISTED)
        if not tasks:
            return "No tasks in this chat. Start one with /bg <what to do>."
        lines = ["Tasks (newest first):"]
        for task in tasks:
            prompt = task.prompt if len(task.prompt) <= 50 else task.prompt[:47] + "..."
            lines.append(f"{task.id} {task.kind} {task.status}: {prompt}")
        return "\n".join(lines)

    async def cancel_command(self, inbound: Inbound, key: str, args: str) -> str:
        tid = args.strip()
        if not tid:
            return "Write /cancel <id>; /tasks lists the ids."
        return await self.cancel(key, tid, inbound.source.user_id or "a user")

    # ------------------------------------------------------------ the agent's tool

    def for_turn(self, ctx: ToolContext) -> ToolRunner:
        return DelegateTool(self, ctx)


class DelegateTool:
    """``delegate(task)`` for one turn: starts a child task; never raises for the model."""

    def __init__(self, desk: BackgroundTasks, ctx: ToolContext) -> None:
        self._desk = desk
        self._ctx = ctx
        self._asked: dict[str, int] = {}

    def specs(self) -> tuple[dict[str, Any], ...]:
        return (DELEGATE_TOOL_SCHEMA,)

    async def call(self, call: ToolCall) -> ToolResult:
        prompt = call.arguments.get("task")
        if not isinstance(prompt, str):
            return ToolResult(call.call_id, "delegate needs a string argument 'task'", "error")
        # The seed is the task within its turn's item (the n-th time this turn delegates this
        # text), not the provider's call id: a turn resumed after a crash that delegates the same
        # work again finds the task it started before instead of starting a second one.
        n = self._asked.get(prompt.strip(), 0)
        self._asked[prompt.strip()] = n + 1
        seed = f"delegate\0{self._ctx.session_key}\0{self._ctx.inbox_seq}\0{prompt.strip()}\0{n}"
        try:
            task = await self._desk.start(
                "delegate", seed, self._ctx.session_key, self._ctx.source, prompt, self._ctx.reply_to
            )
        except ValueError as exc:
            return ToolResult(call.call_id, f"not started: {exc}", "error")
        except StoreUnavailable as exc:
            return ToolResult(call.call_id, f"not started: storage is unavailable ({exc})", "error")
        return ToolResult(
            call.call_id,
            f"started task {task.id}; its result will arrive as a new message in this conversation",
            "ok",
        )


class CombinedTools:
    """Several runners as one: the specs of all, each call to the runner that names its tool."""

    def __init__(self, runners: list[ToolRunner]) -> None:
        self._runners = runners
        self._by_name = {spec["function"]["name"]: r for r in runners for spec in r.specs()}

    def specs(self) -> tuple[dict[str, Any], ...]:
        return tuple(spec for r in self._runners for spec in r.specs())

    async def call(self, call: ToolCall) -> ToolResult:
        runner = self._by_name.get(call.name)
        if runner is None:
            return ToolResult(call.call_id, f"there is no tool {call.name!r}", "error")
        return await runner.call(call)
