"""The Store protocol and the values that cross it.

Every method is a coroutine and never blocks the event loop. A method that
cannot reach its storage raises ``StoreUnavailable``; "absent" is ``None`` or
an empty list, never an exception, so callers never mistake one for the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from chatgate.agents.base import HistoryEntry
from chatgate.domain.context import ChatLabels
from chatgate.domain.inbound import Inbound
from chatgate.domain.source import Source

OutboxKind = Literal["final", "notice", "command"]
OutboxStatus = Literal["pending", "sending", "sent", "failed", "ambiguous"]


class StoreError(Exception):
    """Base of store failures."""


class StoreUnavailable(StoreError):
    """The store could not be read or written; nothing was changed."""


class LeaseLost(StoreError):
    """This process no longer owns the session (it expired or was stopped)."""


@dataclass(frozen=True, slots=True)
class OutboxDraft:
    """An outbound message to record; the idempotency key makes re-recording a no-op."""

    idem_key: str
    platform: str
    chat_id: str
    session_key: str
    kind: OutboxKind
    text: str
    in_reply_to: str | None = None
    target: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OutboxRow:
    id: int
    idem_key: str
    platform: str
    chat_id: str
    session_key: str
    kind: OutboxKind
    text: str
    in_reply_to: str | None
    status: OutboxStatus
    attempts: int
    possibly_duplicate: bool
    platform_message_id: str | None
    created_at: float
    target: dict[str, Any]

    @property
    def message_id(self) -> str:
        """The stable id a client sees; it never changes across resends."""
        return f"o{self.id}"


@dataclass(frozen=True, slots=True)
class AdmitRequest:
    """One inbound event to commit, with what admission decided about it.

    ``queued`` is false for control commands: they are recorded as done, their
    reply (``reply``) is committed in the same transaction. With
    ``cancel_queued``, ``{cancelled}`` in the reply text becomes the number of
    waiting items (not yet picked up by a turn) the same transaction dropped.
    """

    inbound: Inbound
    session_key: str
    queued: bool = True
    reply: OutboxDraft | None = None
    cancel_queued: bool = False
    reset_session: bool = False


@dataclass(frozen=True, slots=True)
class AdmitResult:
    new: bool
    seq: int
    session_key: str
    cancelled: int = 0


@dataclass(frozen=True, slots=True)
class QueuedItem:
    seq: int
    session_key: str
    inbound: Inbound
    attempts: int
    """How many times a turn has started for this item, this one included."""


@dataclass(frozen=True, slots=True)
class Claim:
    """A leased session and the batch of items its next turn must handle."""

    session_key: str
    session_id: str
    items: tuple[QueuedItem, ...]


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    session_key: str
    session_id: str
    item_seqs: tuple[int, ...]
    transcript: tuple[HistoryEntry, ...]
    outbox: tuple[OutboxDraft, ...]
    outcome: str


@dataclass(frozen=True, slots=True)
class OutboxSettlement:
    """What happened to one claimed outbox row."""

    id: int
    status: OutboxStatus
    platform_message_id: str | None = None
    retry_at: float | None = None
    error: str | None = None
    counts_attempt: bool = True
    """False when nothing was tried (no route to the chat yet): the attempt is given back."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    session_key: str
    session_id: str
    platform: str
    chat_id: str | None
    created_at: float
    last_activity: float
    queued: int
    """Unfinished items, including those a turn is working on."""
    leased_by: str | None
    last_error: str | None
    waiting: int
    """Unfinished items no turn has picked up yet."""


@dataclass(frozen=True, slots=True)
class RejectedInbound:
    transport: str
    delivery_id: str | None
    reason: str
    excerpt: str
    received_at: float


@dataclass(frozen=True, slots=True)
class QueueStats:
    depth: int
    oldest_admitted_at: float | None
    last_error: str | None


class Store(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def ping(self, timeout: float = 1.0) -> None: ...

    async def recover(self, owner: str) -> int:
        """Take over what a dead predecessor left: leases, mid-send rows."""
        ...

    async def admit(self, request: AdmitRequest) -> AdmitResult: ...

    async def claim_sessions(
        self, owner: str, limit: int, lease_seconds: float, batch: int
    ) -> list[Claim]: ...

    async def renew_lease(self, session_key: str, owner: str, lease_seconds: float) -> bool: ...

    async def complete_turn(
        self, owner: str, outcome: TurnOutcome, lease_seconds: float, batch: int
    ) -> Claim | None:
        """Commit a turn and claim the session's next batch (or release the lease)."""
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

    async def session_source(self, session_key: str) -> Source | None: ...

    async def chat_labels(self, platform: str, scope: str | None, chat_id: str) -> ChatLabels: ...

    async def history(self, session_id: str, limit: int) -> list[HistoryEntry]: ...

    async def session_info(self, session_key: str) -> SessionInfo | None: ...

    async def list_sessions(self, limit: int = 100) -> list[SessionInfo]: ...

    async def queue_depth(self) -> int: ...

    async def queue_stats(self) -> QueueStats: ...

    async def claim_outbox(self, limit: int) -> list[OutboxRow]: ...

    async def settle_outbox(self, settlements: list[OutboxSettlement]) -> None: ...

    async def unconfirmed_for_chat(self, platform: str, chat_id: str) -> list[OutboxRow]: ...

    async def confirm_outbox(self, platform: str, chat_id: str, row_id: int) -> bool: ...

    async def get_cursor(self, name: str) -> str | None:
        """The value last stored under ``name`` (an upstream position such as a poll offset)."""
        ...

    async def set_cursor(self, name: str, value: str) -> None:
        """Store ``value`` under ``name``; returns only after it is committed."""
        ...

    async def cancel_queued(self, session_key: str, reason: str) -> int:
        """Cancel the session's unfinished items (its running turn's included); returns how many."""
        ...

    async def record_rejected(
        self, transport: str, delivery_id: str | None, reason: str, excerpt: str
    ) -> None:
        """Keep a delivery that can never be admitted, with why (so acking it loses nothing silently)."""
        ...

    async def rejected(self, limit: int = 100) -> list[RejectedInbound]: ...
