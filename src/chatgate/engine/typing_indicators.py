"""Typing indicators sent in booked rate-budget slots, by a sender the engine owns.

A turn asks for an indicator; the sender books the platform slot at once (a typing
indicator is not a message: it spends no chat or group budget, but it respects a
pause the platform imposed) and sends when the slot comes. The send belongs to this
sender, not to the turn: under load a turn often ends before its slot, and the
indicator is then still worth showing, because the reply waits for a slot too (and
its slot, booked later, comes after). ``aclose`` cancels what is still waiting.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from chatgate.domain.outbound import RetryLater
from chatgate.domain.tasks import cancel_and_wait
from chatgate.engine.ports import EditablePlatform, TypingTargets
from chatgate.engine.ratelimit import RateBudget

log = logging.getLogger(__name__)


class TypingIndicators:
    def __init__(self, budget: RateBudget, call_timeout: float = 10.0, max_waiting: int = 10_000) -> None:
        self._budget = budget
        self._timeout = call_timeout
        self._max_waiting = max_waiting
        self._tasks: set[asyncio.Task[None]] = set()

    def announce(
        self,
        platform: EditablePlatform,
        platform_name: str,
        chat_id: str,
        target: Mapping[str, str],
        *,
        patience: float,
        wanted: Callable[[], bool] = lambda: True,
    ) -> bool:
        """Book a slot within ``patience`` seconds and send then; False when none is that near."""
        if len(self._tasks) >= self._max_waiting:
            return False
        if isinstance(platform, TypingTargets) and not platform.can_type(chat_id, target):
            return False  # it would make no call: no slot for it
        if self._budget.delay(platform_name, chat_id, "typing") > patience:
            return False
        wait = self._budget.take(platform_name, chat_id, "typing")
        send = self._send(platform, platform_name, chat_id, dict(target), wait, wanted)
        task = asyncio.create_task(send, name="chatgate-typing-send")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _send(
        self,
        platform: EditablePlatform,
        platform_name: str,
        chat_id: str,
        target: Mapping[str, str],
        wait: float,
        wanted: Callable[[], bool],
    ) -> None:
        while wait > 0:
            await asyncio.sleep(wait)
            wait = self._budget.depart(platform_name)
        if not wanted() or self._budget.held(platform_name, chat_id) > 0:
            return  # a preview now shows, or the platform asked for a pause meanwhile
        try:
            async with asyncio.timeout(self._timeout):
                result = await platform.send_typing(chat_id, target)
        except Exception as exc:  # best effort: an indicator is never retried
            log.debug("typing indicator failed: %s", exc)
            return
        if isinstance(result, RetryLater) and result.scope is not None:
            self._budget.penalize(platform_name, chat_id, result.retry_after, result.scope)

    async def aclose(self) -> None:
        await cancel_and_wait(list(self._tasks))
