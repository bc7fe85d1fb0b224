"""Values that cross the Store protocol, built the same way by every store suite."""

from __future__ import annotations

from chatgate.domain.history import HistoryEntry
from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.source import Source
from chatgate.domain.turns import Claim, TurnOutcome


def src(
    chat_id: str = "c1",
    *,
    platform: str = "webchat",
    user_id: str = "u1",
    chat_type: str = "dm",
    scope_id: str | None = None,
    chat_name: str | None = None,
    chat_topic: str | None = None,
    user_name: str | None = None,
) -> Source:
    return Source(
        platform=platform,
        chat_id=chat_id,
        chat_type=chat_type,  # type: ignore[arg-type]
        user_id=user_id,
        user_name=user_name,
        scope_id=scope_id,
        chat_name=chat_name,
        chat_topic=chat_topic,
    )


def outcome(claim: Claim, *outbox: OutboxDraft, reply: str = "ok") -> TurnOutcome:
    transcript = tuple(HistoryEntry(role="user", content=i.inbound.text) for i in claim.items)
    return TurnOutcome(
        session_key=claim.session_key,
        session_id=claim.session_id,
        item_seqs=tuple(i.seq for i in claim.items),
        transcript=(*transcript, HistoryEntry(role="assistant", content=reply)),
        outbox=outbox,
        outcome="answered",
    )
