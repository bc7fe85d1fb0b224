"""What admission commits to the inbox and what the inbox reports back.

``AdmitRequest`` carries admission's decisions (queued or a command, its reply, an
approval answer) so the store commits the event and their effects in one transaction.
"""

from __future__ import annotations

import msgspec

from chatgate.domain.approvals import ApprovalAnswer, ApprovalResolution
from chatgate.domain.background import TASK_TRANSPORT
from chatgate.domain.inbound import Inbound
from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.schedules import SCHEDULE_TRANSPORT
from chatgate.domain.turns import Claim, ClaimTerms

INTERNAL_TRANSPORTS = frozenset({SCHEDULE_TRANSPORT, TASK_TRANSPORT})
"""Transports the gateway feeds itself (a schedule firing, a task's events): no client sent
them, so they say nothing about where the chat's people are connected."""


class AdmitRequest(msgspec.Struct, frozen=True):
    """One inbound event to commit, with what admission decided about it.

    ``queued`` is false for control commands: they are recorded as done, their
    reply (``reply``) is committed in the same transaction. With
    ``cancel_queued``, ``{cancelled}`` in the reply text becomes the number of
    waiting items (not yet picked up by a turn) the same transaction dropped.
    With ``answer``, a new event also resolves that approval in the same
    transaction (a redelivered one resolves nothing), and ``answer.render`` writes
    the reply's text from the recorded result. With ``claim``, a new queued event's
    session is also claimed on those terms in the same transaction when the claim loop
    would claim it (no live lease, no retry pending, no suspect at its head); a store
    may decline (PostgreSQL does) and ``AdmitResult.claim`` says what it took.
    ``redoable``: the event is replayable (``Inbound.replayable``), so a plain queued
    admission (``relaxed``) may commit without an fsync of its own; SQLite's writer makes it
    durable with the next durable commit (the turn's, before any reply), when the lane asks
    (``Inbox.make_durable``, before it acknowledges upstream), or a second later.
    """

    inbound: Inbound
    session_key: str
    queued: bool = True
    reply: OutboxDraft | None = None
    cancel_queued: bool = False
    reset_session: bool = False
    answer: ApprovalAnswer | None = None
    claim: ClaimTerms | None = None
    redoable: bool = False

    @property
    def relaxed(self) -> bool:
        """Whether a power cut that takes this admission is harmless: its event is read back
        after the restart, and the transaction neither replies nor cancels nor answers anything
        (a reply would be sent on the strength of it)."""
        return (
            self.redoable
            and self.queued
            and self.reply is None
            and not self.cancel_queued
            and not self.reset_session
            and self.answer is None
        )

    @property
    def from_a_client(self) -> bool:
        """Whether a client sent it (a platform, the web chat), not the gateway itself: only then
        does the admitting process become the one the chat is reachable through."""
        return self.inbound.transport not in INTERNAL_TRANSPORTS


class AdmitResult(msgspec.Struct, frozen=True):
    new: bool
    seq: int
    session_key: str
    cancelled: int = 0
    resolution: ApprovalResolution | None = None
    """Set when the request carried an ``answer`` and was new."""
    claim: Claim | None = None
    """The session, leased on the request's ``claim`` terms, with its items to run."""


class RejectedInbound(msgspec.Struct, frozen=True):
    """A delivery acknowledged without being admitted, kept with why (nothing is dropped silently)."""

    transport: str
    delivery_id: str | None
    reason: str
    excerpt: str
    received_at: float


class QueueStats(msgspec.Struct, frozen=True):
    depth: int
    oldest_admitted_at: float | None
    last_error: str | None
