"""The retention sweep (``media.retention_days``): old media records go, then the blobs no record
names, on both backends (docs/media.md, "Retention and quotas").

Order is what makes a crash harmless: the records are deleted (committed) first, and a blob is
deleted only when no record names it and it was stored before the cutoff (a blob stored again,
an upload waiting for its message, is young again). A process killed between the two steps left
at worst an orphan blob, which the next pass removes. Every step is idempotent and takes at most
a batch, so in a fleet every process may sweep: two passes at once delete each row once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.store_roles import Media
from chatgate.domain.tasks import cancel_and_wait

log = logging.getLogger(__name__)

DAY = 86400.0
SWEEP_INTERVAL = 3600.0
"""Seconds between passes: retention counts in days, so an hour late is nothing."""
MOST_STEPS = 1000
"""Batches one pass takes at most of each kind (the store bounds a batch): a huge backlog is
worked off over several passes instead of holding the store for one long pass."""


def expired_note(days: float) -> str:
    """What the model reads for a history's file that retention removed."""
    return f"it expired after {days:g} days (media.retention_days)"


class RetentionSweeper:
    """Owns the sweep's task: ``start`` at the engine's start, ``stop`` cancels and awaits it."""

    def __init__(
        self,
        store: Media,
        days: float,
        interval: float = SWEEP_INTERVAL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._days = days
        self._interval = interval
        self._clock = clock
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="chatgate-media-retention")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.sweep()
            except StoreUnavailable as exc:
                log.warning("media retention pass skipped: %s", exc)  # the next pass catches up
            except Exception:  # a bug here must not end the sweeping for good
                log.exception("media retention pass failed")
            await asyncio.sleep(self._interval)

    async def sweep(self) -> tuple[int, int]:
        """One pass: the records older than the cutoff, then the unreferenced blobs older than it."""
        cutoff = self._clock() - self._days * DAY
        records = await _drain(lambda: self._store.expire_media(cutoff))
        blobs = await _drain(lambda: self._store.sweep_blobs(cutoff))
        if records or blobs:
            log.info(
                "media retention: %d record(s) and %d file(s) older than %g days removed",
                records,
                blobs,
                self._days,
                extra={"records": records, "blobs": blobs},
            )
        return records, blobs


async def _drain(step: Callable[[], Awaitable[int]]) -> int:
    total = 0
    for _ in range(MOST_STEPS):
        done = await step()
        total += done
        if done == 0:
            break
    return total
