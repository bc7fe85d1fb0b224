"""A turn's tool calls as a live task card, where the platform shows one (``TaskCardPlatform``).

Each tool call is a task: in progress when the agent hands it to the runner, complete or
error when the runner answers. Every change shows the whole card again under one card id
per turn, and the turn's end stops that same card (LC-07: one derivation for both), after
any outcome. Best effort throughout (LC-08/09): a failing or slow card call is logged at
debug level and never delays or fails the turn; the tasks kept are bounded.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable

from chatgate.agents.base import ToolCall, ToolResult
from chatgate.domain.outbound import DeliveryResult, TaskProgress, TaskState
from chatgate.domain.source import Source, egress_target
from chatgate.engine.ports import TaskCardPlatform, task_cards

log = logging.getLogger(__name__)
MAX_TASKS = 50
"""Tasks one card shows (the latest); a turn with more tool calls drops the oldest."""


class TaskCard:
    def __init__(self, adapter: object, source: Source, reply_to: str | None, timeout: float = 10.0) -> None:
        self._platform: TaskCardPlatform | None = task_cards(adapter)
        self._source = source
        self._timeout = timeout
        self.card_id = f"turn:{reply_to or source.chat_id or ''}:{secrets.token_hex(4)}"
        self._tasks: OrderedDict[str, TaskProgress] = OrderedDict()
        self._shown = False

    @property
    def native(self) -> bool:
        """The platform shows the turn's tool calls as a card of its own."""
        return self._platform is not None

    async def started(self, call: ToolCall) -> None:
        self._tasks[call.call_id] = TaskProgress(call.call_id, call.name, "in_progress")
        while len(self._tasks) > MAX_TASKS:
            self._tasks.popitem(last=False)
        await self._show()

    async def finished(self, result: ToolResult) -> None:
        task = self._tasks.get(result.call_id)
        if task is None:
            return
        state: TaskState = "complete" if result.status == "ok" else "error"
        self._tasks[result.call_id] = TaskProgress(task.id, task.title, state)
        await self._show()

    async def stop(self) -> None:
        if self._platform is None or not self._shown:
            return
        self._shown = False
        await self._call(self._platform.stop_tasks(self._source.chat_id or "", self.card_id, self._target()))

    def _target(self) -> dict[str, str]:
        return egress_target(self._source)

    async def _show(self) -> None:
        if self._platform is None:
            return
        call = self._platform.show_tasks(
            self._source.chat_id or "", self.card_id, tuple(self._tasks.values()), self._target()
        )
        if await self._call(call):
            self._shown = True

    async def _call(self, call: Awaitable[DeliveryResult | None]) -> bool:
        try:
            result = await asyncio.wait_for(call, self._timeout)
        except Exception as exc:  # a card is never the reply
            log.debug("task card call failed: %s", exc)
            return False
        return result is not None
