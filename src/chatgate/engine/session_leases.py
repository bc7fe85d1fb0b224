"""A scheduler worker's hold on its session's lease: renewed while the worker runs, given
back (with its items) when the worker ends without committing them."""

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

    async def keep(self, key: str, lost: Callable[[str], None]) -> None:
        """Renew the lease every third of its length; call ``lost`` when it is no longer ours."""
        lease = self._lease
        last_renewed = time.monotonic()
        while True:
            await asyncio.sleep(lease / 3)
            try:
                held = await self._store.renew_lease(key, self._owner, lease)
            except StoreUnavailable as exc:
                log.warning("cannot renew lease on %s: %s", key, exc)
                # Past the lease another owner may take the session: stop before it does.
                held = time.monotonic() - last_renewed < lease * 0.9
            else:
                last_renewed = time.monotonic() if held else last_renewed
            if not held:
                lost(key)
