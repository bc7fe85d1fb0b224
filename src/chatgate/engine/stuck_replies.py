"""Stuck replies made visible: a reply that should be on its way and is not is named in the
log (once while it stays stuck), and the outbox's backlog is kept in three gauges.

Delivery itself never waits for this watch: it only reads, every ``interval`` seconds, so an
operator learns of a reply held by a claim that never settles, or due with no process
claiming it, without reading the database (``StuckReply`` says what counts).
"""

from __future__ import annotations

import asyncio
import logging
import time

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.outbox import STUCK_AFTER_SECONDS, Undelivered
from chatgate.domain.store_roles import OutboxWatch
from chatgate.domain.tasks import cancel_and_wait
from chatgate.engine.metrics import GatewayMetrics

log = logging.getLogger(__name__)

MOST_NAMED = 20
"""Stuck replies read (and so named) per check: the log line stays bounded whatever the backlog."""


class StuckReplyWatch:
    def __init__(
        self,
        store: OutboxWatch,
        metrics: GatewayMetrics,
        interval: float = 30.0,
        stuck_after: float = STUCK_AFTER_SECONDS,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._interval = interval
        self._stuck_after = stuck_after
        self._named: set[int] = set()
        """The ids named while they stay stuck (at most ``MOST_NAMED``)."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="chatgate-stuck-replies")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.check()
            except StoreUnavailable:
                continue  # the store's own outage is logged where it is met

    async def check(self) -> Undelivered:
        """Read the backlog now: set the gauges, name what became stuck since the last check."""
        now = time.time()
        found = await self._store.undelivered(now, self._stuck_after, MOST_NAMED)
        self._metrics.undelivered_replies.set(found.count)
        oldest = found.oldest_created_at
        self._metrics.oldest_undelivered_seconds.set(max(0.0, now - oldest) if oldest is not None else 0.0)
        self._metrics.stuck_replies.set(len(found.stuck))
        for reply in found.stuck:
            if reply.id not in self._named:
                log.warning(
                    "a reply is stuck: %s", reply.describe(now),
                    extra={"outbox_id": reply.id, "platform": reply.platform, "chat_id": reply.chat_id},
                )  # fmt: skip
        self._named = {reply.id for reply in found.stuck}
        return found
