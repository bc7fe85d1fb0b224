"""What a lease hands a turn (``Claim`` of ``QueuedItem``s) and what the turn hands back (``TurnOutcome``)."""

from __future__ import annotations

from dataclasses import dataclass

from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbound import Inbound
from chatgate.domain.outbox import OutboxDraft


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
    """Everything one turn commits in one transaction: transcript rows, the items' outcome, outbox rows."""

    session_key: str
    session_id: str
    item_seqs: tuple[int, ...]
    transcript: tuple[HistoryEntry, ...]
    outbox: tuple[OutboxDraft, ...]
    outcome: str
