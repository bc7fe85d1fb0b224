"""The scheduler's hold on its sessions' leases: renewed while their workers run (one task
for all), given back (with the items) when a worker ends without committing them."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.store_roles import Leases

log = logging.getLogger(__name__)

GIVE_BACK_FIRST_PAUSE = 0.2
GIVE_BACK_MAX_PAUSE = 2.0
"""Seconds between two tries to give a session back while the store is unreachable."""


class SessionLeases:
    def __init__(self, store: Leases, owner: str, lease_seconds: float) -> None:
        self._store = store
        self._owner = owner
        self._lease = lease_seconds
        self.stopping = False
        """The scheduler is stopping: a give-back tries once, however patient."""
        self._held: dict[str, float] = {}
        """The sessions whose lease our workers hold, and when each was last renewed (monotonic)."""

    async def give_back(
        self,
        key: str,
        seqs: tuple[int, ...],
        retry_at: float | None,
        error: str | None,
        *,
        patient: bool = False,
    ) -> None:
        """Hand the items back; if even that fails, the lease expiry hands them back.

        ``patient`` (a worker whose turn the store's outage interrupted): keep trying while the
        lease could still be ours, so a database restart stays invisible. Items given back run
        again as a first attempt; left to the lease, their next run counts as a resumed turn
        and the chat is told "the gateway restarted", which it did not."""
        deadline = time.monotonic() + (self._lease if patient and not self.stopping else 0)
        pause = GIVE_BACK_FIRST_PAUSE
        while True:
            try:
                await asyncio.shield(self._store.abandon_turn(self._owner, key, seqs, retry_at, error))
                return
            except StoreUnavailable as exc:
                if time.monotonic() + pause >= deadline or self.stopping:
                    log.warning("could not release %s (%s); it is retried when its lease expires", key, exc)
                    return
            except asyncio.CancelledError as exc:
                log.warning("could not release %s (%s); it is retried when its lease expires", key, exc)
                return
            try:
                await asyncio.sleep(pause)
            except asyncio.CancelledError:
                log.warning("could not release %s (stopped); it is retried when its lease expires", key)
                return
            pause = min(pause * 2, GIVE_BACK_MAX_PAUSE)

    def hold(self, key: str) -> None:
        """``key``'s lease is ours from now (a worker claimed it): keep it renewed."""
        self._held[key] = time.monotonic()

    def release(self, key: str) -> None:
        self._held.pop(key, None)

    async def keep(self, lost: Callable[[str], None]) -> None:
        """Renew every held lease each third of its length, one task for all; ``lost(key)`` when
        one is no longer ours (another owner took it, or the store was down too long)."""
        while True:
            await asyncio.sleep(self._lease / 3)
            keys = list(self._held)
            for key, held in zip(keys, await asyncio.gather(*(self._renew(k) for k in keys)), strict=True):
                if not held and key in self._held:
                    lost(key)

    async def _renew(self, key: str) -> bool:
        try:
            held = await self._store.renew_lease(key, self._owner, self._lease)
        except Exception as exc:  # unavailable, or a bug: one session's renewal never stops the rest
            if isinstance(exc, StoreUnavailable):
                log.warning("cannot renew lease on %s: %s", key, exc)
            else:
                log.exception("renewing the lease on %s failed", key)
            # Past the lease another owner may take the session: stop before it does.
            last_renewed = self._held.get(key, time.monotonic())
            return time.monotonic() - last_renewed < self._lease * 0.9
        if held and key in self._held:
            self._held[key] = time.monotonic()
        return held
