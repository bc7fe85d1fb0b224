"""A gateway in a fleet: the notices other processes send through the shared store.

A PostgreSQL store relays ``LISTEN/NOTIFY`` notices (``PostgresStore.add_listener``): a
message queued or a reply recorded by any process wakes this one's scheduler or delivery
now instead of at its next poll; a ``/stop`` or ``/new`` admitted by another process
cancels the turn running here; an approval answered through another process wakes the
turn waiting here. A store without notices (SQLite: one process) needs none of this.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.store_roles import ApprovalReads
from chatgate.domain.tasks import cancel_and_wait
from chatgate.engine.pipeline import Engine

log = logging.getLogger(__name__)


@runtime_checkable
class FleetNoticeSource(Protocol):
    def add_listener(self, fn: Callable[[str], None]) -> None: ...


class FleetNotices:
    """Acts on the fleet's notices; owns the short tasks they start (cancelled at ``close``)."""

    def __init__(self, engine: Engine, approvals: ApprovalReads) -> None:
        self._engine = engine
        self._approvals = approvals
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def attach(self, store: object) -> bool:
        """Listen to ``store``'s notices if it has any; True when it does."""
        if not isinstance(store, FleetNoticeSource):
            return False
        store.add_listener(self.on_notice)
        return True

    def on_notice(self, notice: str) -> None:
        if self._closed:
            return
        kind, _, arg = notice.partition(":")
        if kind == "inbox":
            self._engine.scheduler.wake()
        elif kind == "outbox":
            self._engine.delivery.wake()
        elif kind == "stop" and arg:
            self._spawn(self._engine.stop_session(arg))
        elif kind == "approval" and arg and self._engine.approvals.is_waiting(arg):
            self._spawn(self._wake_approval(arg))

    async def _wake_approval(self, prompt_id: str) -> None:
        try:
            record = await self._approvals.get_approval(prompt_id)
        except StoreUnavailable as exc:
            log.warning("could not read approval %s answered elsewhere: %s", prompt_id, exc)
            return
        if record is not None and record.state != "pending":
            self._engine.approvals.wake(record)

    def _spawn(self, work: Awaitable[None]) -> None:
        async def run() -> None:
            await work

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        self._closed = True
        await cancel_and_wait(list(self._tasks))
