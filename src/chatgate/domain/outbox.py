"""Outbound messages: the drafts a turn or command records, and the ledger rows delivery works on."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

OutboxKind = Literal["final", "notice", "command"]
OutboxStatus = Literal["pending", "sending", "sent", "failed", "ambiguous"]


class OutboxDraft(msgspec.Struct, frozen=True):
    """An outbound message to record; the idempotency key makes re-recording a no-op."""

    idem_key: str
    platform: str
    chat_id: str
    session_key: str
    kind: OutboxKind
    text: str
    in_reply_to: str | None = None
    target: dict[str, Any] = msgspec.field(default_factory=dict)

    def claimed(self, row_id: int, now: float, target: dict[str, Any]) -> OutboxRow:
        """The row this draft is once recorded already claimed: ``sending``, its first attempt
        counted, as ``claim_outbox`` hands a new row out. ``target`` is the stored copy."""
        return OutboxRow(
            id=row_id,
            idem_key=self.idem_key,
            platform=self.platform,
            chat_id=self.chat_id,
            session_key=self.session_key,
            kind=self.kind,
            text=self.text,
            in_reply_to=self.in_reply_to,
            status="sending",
            attempts=1,
            possibly_duplicate=False,
            platform_message_id=None,
            created_at=now,
            target=target,
        )


class OutboxRow(msgspec.Struct, frozen=True):
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


class OutboxSettlement(msgspec.Struct, frozen=True):
    """What happened to one claimed outbox row."""

    id: int
    status: OutboxStatus
    platform_message_id: str | None = None
    retry_at: float | None = None
    error: str | None = None
    counts_attempt: bool = True
    """False when the claim was no real try, so the attempt is given back: nothing was sent (no
    route to the chat yet), or the platform only asked us to wait (a rate limit, however often)."""


STUCK_AFTER_SECONDS = 120.0
"""How old an undelivered reply must be before it counts as stuck (when nothing explains the wait)."""


class StuckReply(msgspec.Struct, frozen=True):
    """A reply that should be on its way and is not: the head of its chat, recorded over
    ``STUCK_AFTER_SECONDS`` ago, and either claimed all that time or due with no one claiming
    it. A reply waiting for its retry time (no client connected, a rate limit) is not stuck."""

    id: int
    platform: str
    chat_id: str
    status: str
    created_at: float
    last_error: str | None
    held_by: str | None

    def describe(self, now: float) -> str:
        held = f", held by {self.held_by}" if self.held_by else ""
        error = f": {self.last_error}" if self.last_error else ""
        age = now - self.created_at
        return f"#{self.id} {self.platform}/{self.chat_id} {self.status} for {age:.0f}s{held}{error}"


class Undelivered(msgspec.Struct, frozen=True):
    """The outbox as an operator watches it: how many replies are on their way, the oldest, the stuck."""

    count: int
    oldest_created_at: float | None
    stuck: tuple[StuckReply, ...] = ()
