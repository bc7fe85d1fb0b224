"""What this process is sending now, so that a row it holds with no send under way is released.

A delivery claim (``claim_outbox``, or a turn's commit claiming its replies) marks rows
``sending`` under this instance's id. When its commit answer is lost the caller hears
"failed" though the rows may be held: nothing here will send them, and a peer may take them
only when the lease runs out (minutes). The same holds for a settlement that failed after a
send. Either failure marks the ledger *in doubt*; a failed ``claim_outbox`` then, before it
reports, and every claim while the doubt stands, releases every row held by this instance
that no local attempt covers (``release_unattended``), naming each in the log, so they are
claimed again as possible duplicates.

The release must not take a row a concurrent claim of this process committed a moment ago
and has not registered yet, so it runs alone: it waits until no claim is in flight and
holds new ones back while it runs (one short write, only after a failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable

from chatgate.domain.errors import StoreUnavailable

log = logging.getLogger(__name__)


class LocalSends:
    """Row ids handed out and not yet settled, claims in flight, and whether a claim is in doubt."""

    def __init__(self) -> None:
        self._rows: set[int] = set()
        self._claims = 0
        self._no_claims = asyncio.Event()
        self._no_claims.set()
        self._release_over = asyncio.Event()
        self._release_over.set()
        self._releasing = asyncio.Lock()
        self.in_doubt = False
        """A claim or settlement failed: rows held here may have no send under way."""

    @contextlib.asynccontextmanager
    async def claiming(self) -> AsyncIterator[None]:
        """Around a write that may claim rows for this instance (call ``handed_out`` inside)."""
        while not self._release_over.is_set():
            await self._release_over.wait()
        self._claims += 1
        self._no_claims.clear()
        try:
            yield
        except StoreUnavailable as exc:
            self.in_doubt = True
            log.warning(
                "a delivery claim is in doubt (%s); rows it may hold are released at the next claim", exc
            )
            raise
        finally:
            self._claims -= 1
            if self._claims == 0:
                self._no_claims.set()

    def handed_out(self, ids: Iterable[int]) -> None:
        self._rows.update(ids)

    def settled(self, ids: Iterable[int], *, recorded: bool) -> None:
        """The attempts on ``ids`` are over; not ``recorded``: the rows may still be held here."""
        self._rows.difference_update(ids)
        if not recorded:
            self.in_doubt = True

    @contextlib.asynccontextmanager
    async def releasing(self) -> AsyncIterator[list[int] | None]:
        """Alone (no claim in flight, none starting): the ids with a send under way, or None when
        there is nothing in doubt or another release runs. Leave it without error to clear the doubt."""
        if not self.in_doubt or self._releasing.locked():
            yield None
            return
        async with self._releasing:
            self._release_over.clear()
            try:
                await self._no_claims.wait()
                self.in_doubt = False
                try:
                    yield sorted(self._rows)
                except BaseException:
                    self.in_doubt = True
                    raise
            finally:
                self._release_over.set()
