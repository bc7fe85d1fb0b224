"""The lease rules of a turn, once for both backends: which sessions a claim takes (suspects
one at a time), a turn's commit under its lease's fence, its abandon, and a resume notice.

A turn's commit is one transaction: while ``owner`` still holds the session and every item it
ran (the fence against a stale owner's late commit; ``LeaseLost`` otherwise), the items are
done, the transcript grows, a child turn ends its task (``task_rules.finish_tasks``), the
replies are recorded (up to ``send_room`` of them already claimed for delivery, as
``claim_outbox`` would claim them), and the session's next batch is taken or its lease let go.
Each backend writes the statements (``TurnStatements``); PostgreSQL locks the session row and
also requires the items to be claimed by the owner (a fleet can take a turn over).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from chatgate.domain.background import TaskRecord, may_be_child_session
from chatgate.domain.errors import LeaseLost
from chatgate.domain.history import HistoryEntry
from chatgate.domain.outbox import OutboxDraft, OutboxRow
from chatgate.domain.turns import Claim, TurnCommit, TurnOutcome
from chatgate.store import task_rules
from chatgate.store.task_rules import TaskStatements


class _Candidate(Protocol):
    """A candidate row (``sqlite3`` tuple or ``asyncpg.Record``): key, session id, suspect, preview."""

    def __getitem__(self, index: int, /) -> Any: ...


Candidate = TypeVar("Candidate", bound=_Candidate)
T = TypeVar("T")


def choose(candidates: list[Candidate], isolated: int) -> list[Candidate]:
    """The candidates in order, at most ``isolated`` of them suspects (item 2 of a candidate:
    its head item died with ``SUSPECT_AFTER_DEATHS`` turns): one suspect at a time runs alone,
    the others wait for it."""
    chosen = []
    for candidate in candidates:
        if candidate[2]:
            if isolated <= 0:
                continue  # one suspect at a time: it waits for the running one
            isolated -= 1
        chosen.append(candidate)
    return chosen


class TurnStatements(ABC):
    """A backend's lease statements, on the connection of the transaction the rule runs in."""

    @abstractmethod
    async def leased_session_id(self, session_key: str, owner: str) -> str | None:
        """The session's conversation while ``owner`` holds its lease (the row locked where
        others could change it), else None."""

    @abstractmethod
    async def items_held(self, seqs: tuple[int, ...], owner: str) -> int:
        """How many of ``seqs`` are still queued for ``owner``'s turn."""

    @abstractmethod
    async def mark_done(self, seqs: tuple[int, ...], outcome: str, now: float) -> None: ...

    @abstractmethod
    async def append_transcript(
        self, session_id: str, session_key: str, entries: Sequence[HistoryEntry], now: float
    ) -> None: ...

    @abstractmethod
    def tasks(self) -> TaskStatements:
        """The task statements on the same connection (a child turn ends its task)."""

    @abstractmethod
    async def insert_claimed(self, draft: OutboxDraft, now: float) -> OutboxRow | None:
        """Record ``draft`` claimed for delivery if ``claim_outbox`` would hand it over now, else
        pending; the claimed row, or None."""

    @abstractmethod
    async def insert_outbox(self, draft: OutboxDraft, now: float) -> None: ...

    @abstractmethod
    async def renew_after_turn(self, session_key: str, now: float, lease_s: float) -> None:
        """The session was active now; its fence and error are cleared and its lease extended."""

    @abstractmethod
    async def take_batch(self, session_key: str, session_id: str, batch: int, owner: str) -> Claim | None:
        """Claim the session's next waiting items for ``owner`` (None when none wait)."""

    @abstractmethod
    async def release_lease(self, session_key: str) -> None: ...

    @abstractmethod
    async def give_back(self, session_key: str, owner: str, seqs: tuple[int, ...]) -> None:
        """Items of an abandoned turn wait again, their attempt given back: ``seqs``, and every
        other item of the session ``owner`` still has claimed (a commit that took the next batch
        but was reported failed: its items were claimed for a turn that never ran)."""

    @abstractmethod
    async def release_for_retry(
        self, session_key: str, owner: str, retry_at: float | None, error: str | None
    ) -> None: ...

    @abstractmethod
    async def set_preview(self, owner: str, session_key: str, message_id: str | None) -> bool:
        """The turn's streaming preview while ``owner`` holds the session; whether it does."""


async def committed_then_logged(commit: Callable[[list[TaskRecord]], Awaitable[T]]) -> T:
    """Run a turn's commit (which refills the list with the tasks it ended, on each run of its
    transaction), then log those tasks once, after it committed."""
    finished: list[TaskRecord] = []
    committed = await commit(finished)
    task_rules.log_finished_tasks(finished)
    return committed


async def commit_turn(
    sql: TurnStatements,
    owner: str,
    out: TurnOutcome,
    lease_s: float,
    batch: int,
    now: float,
    send_room: int = 0,
    finished: list[TaskRecord] | None = None,
) -> TurnCommit:
    """Commit the turn; ``finished`` is refilled with the tasks it ended (a rerun refills it)."""
    session_id = await sql.leased_session_id(out.session_key, owner)
    if session_id is None:
        raise LeaseLost(f"lease on {out.session_key} is no longer held by {owner}")
    if await sql.items_held(out.item_seqs, owner) != len(set(out.item_seqs)):
        raise LeaseLost(f"items of {out.session_key} were cancelled or taken over while the turn ran")
    await sql.mark_done(out.item_seqs, out.outcome, now)
    await sql.append_transcript(out.session_id, out.session_key, out.transcript, now)
    ended = (
        await task_rules.finish_tasks(sql.tasks(), out.item_seqs, out.transcript, out.outcome, now)
        if may_be_child_session(out.session_key)
        else []
    )
    if finished is not None:
        finished[:] = ended
    sending: list[OutboxRow] = []
    for draft in out.outbox:
        if len(sending) < send_room:
            row = await sql.insert_claimed(draft, now)
            if row is not None:
                sending.append(row)
        else:
            await sql.insert_outbox(draft, now)
    await sql.renew_after_turn(out.session_key, now, lease_s)
    claim = await sql.take_batch(out.session_key, session_id, batch, owner)
    if claim is None:
        await sql.release_lease(out.session_key)
    return TurnCommit(claim, tuple(sending))


async def abandon_turn(
    sql: TurnStatements,
    owner: str,
    session_key: str,
    seqs: tuple[int, ...],
    retry_at: float | None,
    error: str | None,
) -> None:
    """Hand the session back, fenced until ``retry_at``; a former owner changes nothing (the
    session and its attempts belong to someone else now)."""
    if await sql.leased_session_id(session_key, owner) is None:
        return
    await sql.give_back(session_key, owner, seqs)
    # The turn's own process closed its preview (best effort): nothing is left to take over.
    await sql.release_for_retry(session_key, owner, retry_at, error)


async def record_notices(
    sql: TurnStatements, owner: str, session_key: str, notices: Sequence[OutboxDraft], now: float
) -> bool:
    """The notices are recorded, in order, and one owns the old preview (if it names one), in
    one transaction."""
    if not await sql.set_preview(owner, session_key, None):
        return False
    for notice in notices:
        await sql.insert_outbox(notice, now)
    return True


class CompletesTurns(ABC):
    """``Leases.complete_turn``, once for both role classes: a turn's commit with no reply
    claimed for delivery, answering the session's next batch."""

    @abstractmethod
    async def commit_turn(
        self, owner: str, outcome: TurnOutcome, lease_seconds: float, batch: int, send_room: int
    ) -> TurnCommit: ...

    async def complete_turn(
        self, owner: str, outcome: TurnOutcome, lease_seconds: float, batch: int
    ) -> Claim | None:
        return (await self.commit_turn(owner, outcome, lease_seconds, batch, 0)).next
