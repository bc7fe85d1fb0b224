"""The store's roles for work that outlives a turn (issue 19): schedules and tasks.

Split from ``store_roles`` only for size; ``store_roles.ROLES`` lists them with the others
and the contract suite covers them the same way.
"""

from __future__ import annotations

from typing import Protocol

from chatgate.domain.background import TaskRecord
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.schedules import Schedule

# ---------------------------------------------------------------- schedules


class Schedules(Protocol):
    """Durable schedules: each row's next firing; a firing itself is an inbox event (by its delivery id)."""

    async def save_schedule(self, schedule: Schedule) -> Schedule:
        """Insert a new schedule; an existing id is kept as it is (a redelivered command creates
        nothing twice), except that a ``config`` schedule whose definition changed takes the new
        definition and its ``next_fire_at``. Pause state is never touched. Returns the stored row."""
        ...

    async def get_schedule(self, schedule_id: str) -> Schedule | None: ...

    async def list_schedules(self, session_key: str | None = None) -> list[Schedule]:
        """Every schedule (or those whose target names ``session_key``), oldest first."""
        ...

    async def due_schedules(self, now: float, limit: int) -> list[Schedule]:
        """Unpaused schedules whose ``next_fire_at`` is at or before ``now``, earliest first."""
        ...

    async def next_schedule_at(self) -> float | None:
        """The earliest ``next_fire_at`` of an unpaused schedule; None when none will fire."""
        ...

    async def advance_schedule(self, schedule_id: str, fired_at: float, next_fire_at: float | None) -> bool:
        """Record the firing at ``fired_at`` and store the next one; a compare-and-set on
        ``next_fire_at == fired_at``, so a firing is advanced once (False: it was already)."""
        ...

    async def pause_schedule(self, schedule_id: str, paused: bool) -> bool:
        """Pause or resume; False when there is no such schedule."""
        ...

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Forget a schedule; False when there was none."""
        ...


# ---------------------------------------------------------------- tasks


class Tasks(Protocol):
    """Background and delegated tasks: the record of each, next to its child's inbox events.

    A task's child input is admitted with the task in one transaction; a child's turn commit
    (``Leases.complete_turn``) marks its task done, and for a ``delegate`` task admits the
    completion into the parent's inbox in that same transaction (or drops it, when the parent
    was reset since the dispatch)."""

    async def start_task(self, task: TaskRecord, first: AdmitRequest) -> bool:
        """Record ``task`` and admit its child's input; False (nothing written) when the id exists."""
        ...

    async def get_task(self, task_id: str) -> TaskRecord | None: ...

    async def list_tasks(self, parent_key: str, limit: int = 20) -> list[TaskRecord]:
        """The parent's tasks, newest first."""
        ...

    async def cancel_task(self, task_id: str, note: str) -> TaskRecord | None:
        """End a running task and cancel its child's waiting items; the record as it is now
        (unchanged when it had ended already); None when there is no such task."""
        ...

    async def close_stale_tasks(self, created_before: float, note: str) -> list[TaskRecord]:
        """Close (terminally, never re-run) every running ``delegate`` task created before the
        cutoff, cancelling its child's items, and every completion of such a task still waiting
        in its parent's inbox; returns the tasks it closed."""
        ...
