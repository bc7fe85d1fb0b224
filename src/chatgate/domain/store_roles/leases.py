"""The leases role: who works on which session, and what a running turn records (``TurnJournal``).

Split from ``store_roles`` only for size; ``store_roles`` re-exports both and lists ``Leases``
in ``ROLES`` with the others, and the contract suite covers it the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.turns import Claim, TurnCommit, TurnOutcome

# ---------------------------------------------------------------- leases


class TurnJournal(Protocol):
    """What a running turn records before its commit, guarded by its lease (False: not held)."""

    async def record_preview(self, owner: str, session_key: str, message_id: str | None) -> bool:
        """Remember the platform message the running turn streams its preview in (None: forget
        it), so that a process dying mid-stream leaves its successor the message to take over.
        The commit or abandon of the turn forgets it."""
        ...

    async def record_notices(self, owner: str, session_key: str, notices: Sequence[OutboxDraft]) -> bool:
        """Notices the turn shows before its output (a resumed turn's, the files of its messages
        that did not come through), recorded before the agent runs so they precede the turn's
        output in the chat's order, and the session's recorded preview forgotten in the same
        commit: a resumed turn's notice carries that message now and takes it over."""
        ...


class Leases(TurnJournal, Protocol):
    """Who works on which session: claims in admission order, renewals, the turn's commit or abandon."""

    async def claim_sessions(
        self, owner: str, limit: int, lease_seconds: float, batch: int, isolated: int = 1
    ) -> list[Claim]:
        """Lease up to ``limit`` sessions by their oldest queued item and take their next batch.

        At most ``isolated`` of them may be suspects (a head item in flight at
        ``SUSPECT_AFTER_DEATHS`` process deaths); those are claimed ``isolated`` and
        ``recover`` blames a death during their turn on them (``QueuedItem.crashes``).
        ``Claim.stale_preview`` is the preview a dead process recorded for the session."""
        ...

    async def renew_lease(self, session_key: str, owner: str, lease_seconds: float) -> bool: ...

    async def complete_turn(
        self, owner: str, outcome: TurnOutcome, lease_seconds: float, batch: int
    ) -> Claim | None:
        """Commit a turn and claim the session's next batch (or release the lease)."""
        ...

    async def commit_turn(
        self, owner: str, outcome: TurnOutcome, lease_seconds: float, batch: int, send_room: int
    ) -> TurnCommit:
        """``complete_turn``, and in the same transaction up to ``send_room`` of the rows it records
        claimed for delivery exactly as ``OutboxClaims.claim_outbox`` would claim them: a row is
        claimed only when it is the head of its chat (the chat has no other row ``pending``,
        ``sending`` or ``ambiguous``) and, on a shared store, a chat this process may deliver to.
        The claimed rows come back ``sending`` with their first attempt counted, and the caller
        must deliver and settle them like any claimed row (a process that dies first leaves them
        to ``recover``, which resends them as possible duplicates). The other rows are recorded
        ``pending``, as ``complete_turn`` records them. ``send_room`` 0 is ``complete_turn``."""
        ...

    async def abandon_turn(
        self,
        owner: str,
        session_key: str,
        item_seqs: tuple[int, ...],
        retry_at: float | None,
        error: str | None,
    ) -> None:
        """Give a turn's items back to the queue without counting the attempt."""
        ...
