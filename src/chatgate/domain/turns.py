"""What a lease hands a turn (``Claim`` of ``QueuedItem``s) and what the turn hands back (``TurnOutcome``)."""

from __future__ import annotations

import msgspec

from chatgate.domain.context import ChatLabels
from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbound import Inbound
from chatgate.domain.outbox import OutboxDraft, OutboxRow


class QueuedItem(msgspec.Struct, frozen=True):
    seq: int
    session_key: str
    inbound: Inbound
    attempts: int
    """How many times a turn has started for this item, this one included: every start a
    process did not live to finish or give back (so ``attempts - 1`` deaths it was in flight at)."""
    crashes: int = 0
    """Deaths blamed on this item: the process died while it ran isolated (``Claim.isolated``)."""


class Claim(msgspec.Struct, frozen=True):
    """A leased session and the batch of items its next turn must handle."""

    session_key: str
    session_id: str
    items: tuple[QueuedItem, ...]
    isolated: bool = False
    """The items are suspects (in flight at ``SUSPECT_AFTER_DEATHS`` deaths): the turn runs as
    the only suspect in its process, so a death while it runs is blamed on it."""
    stale_preview: str | None = None
    """The platform message a dead process streamed this session's preview in, never finished."""
    context: TurnContext | None = None
    """What the turn reads first, read in the claim's own transaction (``ClaimTerms.context_rows``)."""


class TurnContext(msgspec.Struct, frozen=True):
    """The session's latest transcript rows and its chat's labels, as of its claim."""

    history: tuple[HistoryEntry, ...]
    labels: ChatLabels


SUSPECT_AFTER_DEATHS = 2
"""An item in flight at this many process deaths (its turn resumed once, concurrently with
others, and the process died again) runs isolated from then on."""


class ClaimTerms(msgspec.Struct, frozen=True):
    """A scheduler's offer to run a session now: the lease a store may take for it inside
    another write (admission's), as the claim loop would have taken it a moment later."""

    owner: str
    lease_seconds: float
    batch: int
    context_rows: int | None = None
    """Also read the turn's context with the claim (this many transcript rows, and the chat's
    labels), sparing the turn two reads of its own; None: the turn reads them."""


class TurnOutcome(msgspec.Struct, frozen=True):
    """Everything one turn commits in one transaction: transcript rows, the items' outcome, outbox rows."""

    session_key: str
    session_id: str
    item_seqs: tuple[int, ...]
    transcript: tuple[HistoryEntry, ...]
    outbox: tuple[OutboxDraft, ...]
    outcome: str


class TurnCommit(msgspec.Struct, frozen=True):
    """What ``Leases.commit_turn`` hands back: the session's next batch, and the rows of the turn
    it claimed for delivery in the same transaction (``sending``, their first attempt counted)."""

    next: Claim | None
    sending: tuple[OutboxRow, ...] = ()
