"""The Store protocol and the values that cross it.

Every method is a coroutine and never blocks the event loop. A method that
cannot reach its storage raises ``StoreUnavailable``; "absent" is ``None`` or
an empty list, never an exception, so callers never mistake one for the other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from chatgate.agents.base import HistoryEntry
from chatgate.domain.context import ChatLabels
from chatgate.domain.inbound import Inbound
from chatgate.domain.prompts import Prompt, options_for
from chatgate.domain.source import Source

OutboxKind = Literal["final", "notice", "command"]
OutboxStatus = Literal["pending", "sending", "sent", "failed", "ambiguous"]
ApprovalState = Literal["pending", "approved", "denied", "expired"]
GrantScope = Literal["session", "always"]


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
class ApprovalRecord:
    """One approval prompt: what was asked, of whom, and how it ended (durable).

    ``state`` starts ``pending`` and changes exactly once (``resolve_approval`` is a
    compare-and-set). ``tier`` is set when approved; ``reason`` when expired
    (``timeout``, ``restart``, ``stopped``). ``prompt_via`` says how it was shown:
    ``buttons`` (``prompt_message_id`` then names the platform message, when known) or
    ``text`` (an outbox notice with ``/approve`` and ``/deny``).
    """

    prompt_id: str
    session_key: str
    session_id: str
    inbox_seq: int
    call_id: str
    tool: str
    command: str
    rule_keys: tuple[str, ...]
    offered_tiers: tuple[str, ...]
    requester_id: str | None
    requester_name: str | None
    requested_at: float
    expires_at: float
    platform: str
    chat_id: str
    target: dict[str, Any]
    reply_to: str | None
    prompt_text: str
    prompt_via: Literal["buttons", "text"] = "text"
    state: ApprovalState = "pending"
    tier: str | None = None
    reason: str | None = None
    answered_by_id: str | None = None
    answered_by_name: str | None = None
    answered_at: float | None = None
    prompt_message_id: str | None = None

    def prompt(self) -> Prompt:
        return Prompt(
            self.prompt_id, self.prompt_text, options_for(self.offered_tiers), self.prompt_message_id
        )


@dataclass(frozen=True, slots=True)
class ApprovalResolution:
    """What ``resolve_approval`` found: the row as recorded after the call, and whether
    *this* call changed it. ``record`` is None when no such prompt exists."""

    record: ApprovalRecord | None
    won: bool


@dataclass(frozen=True, slots=True)
class ApprovalAnswer:
    """An answer committed together with the event that carried it (see ``AdmitRequest``).

    ``render`` turns the recorded result into the reply text (pure: it runs inside the
    transaction, so the reply always states the outcome that was actually recorded).
    """

    prompt_id: str
    outcome: Literal["approved", "denied", "expired"]
    tier: str | None
    by_id: str | None
    by_name: str | None
    render: Callable[[ApprovalResolution], str] | None = None
    reason: str | None = None
    """For ``expired``: why (an answer reaching a prompt whose turn no longer waits closes it)."""


@dataclass(frozen=True, slots=True)
class AdmitRequest:
    """One inbound event to commit, with what admission decided about it.

    ``queued`` is false for control commands: they are recorded as done, their
    reply (``reply``) is committed in the same transaction. With
    ``cancel_queued``, ``{cancelled}`` in the reply text becomes the number of
    waiting items (not yet picked up by a turn) the same transaction dropped.
    With ``answer``, a new event also resolves that approval in the same
    transaction (a redelivered one resolves nothing), and ``answer.render`` writes
    the reply's text from the recorded result.
    """

    inbound: Inbound
    session_key: str
    queued: bool = True
    reply: OutboxDraft | None = None
    cancel_queued: bool = False
    reset_session: bool = False
    answer: ApprovalAnswer | None = None


@dataclass(frozen=True, slots=True)
class AdmitResult:
    new: bool
    seq: int
    session_key: str
    cancelled: int = 0
    resolution: ApprovalResolution | None = None
    """Set when the request carried an ``answer`` and was new."""


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

    async def cancel_running(self, session_key: str, reason: str) -> int:
        """Cancel the items of the session's running turn (the waiting ones stay); returns how many."""
        ...

    async def record_rejected(
        self, transport: str, delivery_id: str | None, reason: str, excerpt: str
    ) -> None:
        """Keep a delivery that can never be admitted, with why (so acking it loses nothing silently)."""
        ...

    async def rejected(self, limit: int = 100) -> list[RejectedInbound]: ...

    async def enqueue_outbox(self, drafts: Sequence[OutboxDraft]) -> None:
        """Record outbound messages outside a turn (idempotent by key); committed on return."""
        ...

    # -- approvals

    async def create_approval(self, record: ApprovalRecord) -> None:
        """Record a new pending approval prompt."""
        ...

    async def set_prompt_shown(self, prompt_id: str, via: str, message_id: str | None) -> None:
        """How the prompt was shown (``buttons``/``text``) and the platform message showing it."""
        ...

    async def get_approval(self, prompt_id: str) -> ApprovalRecord | None: ...

    async def open_approvals(self, platform: str, chat_id: str) -> list[ApprovalRecord]:
        """The chat's pending prompts, oldest first."""
        ...

    async def resolve_approval(
        self,
        prompt_id: str,
        outcome: Literal["approved", "denied", "expired"],
        tier: str | None,
        by_id: str | None,
        by_name: str | None,
        now: float,
        *,
        reason: str | None = None,
        notice: OutboxDraft | None = None,
    ) -> ApprovalResolution:
        """Compare-and-set: changes the row only if it is still pending and, for an
        answer, not past ``expires_at`` (a late answer records the expiry instead and
        loses). A won approval for ``session``/``always`` stores its grants, and
        ``notice`` is recorded, in the same transaction. Returns the recorded row."""
        ...

    async def expire_open_approvals(
        self,
        now: float,
        reason: str,
        notice_for: Callable[[ApprovalRecord], OutboxDraft | None] | None = None,
    ) -> list[ApprovalRecord]:
        """Expire every pending prompt (start-up: their turns died with the old process),
        with each one's notice in the same transaction; returns them as recorded."""
        ...

    async def add_grant(
        self, scope: GrantScope, session_key: str | None, rule_key: str, command: str
    ) -> None:
        """Remember an approval: per session key (until ``/new``) or for every session."""
        ...

    async def granted(self, session_key: str, rule_keys: Sequence[str]) -> bool:
        """Whether every one of ``rule_keys`` is granted for this session (or always)."""
        ...
