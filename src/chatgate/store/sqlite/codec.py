"""How values are stored: JSON columns compact, sorted, UTF-8 kept as is; an outbox draft as
its columns (both backends insert drafts in this column order)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chatgate.domain.outbox import OutboxDraft


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def draft_columns(draft: OutboxDraft, target_json: str, now: float) -> tuple[object, ...]:
    """idem_key, platform, chat_id, session_key, kind, text, in_reply_to, target_json, created_at."""
    return (
        draft.idem_key,
        draft.platform,
        draft.chat_id,
        draft.session_key,
        draft.kind,
        draft.text,
        draft.in_reply_to,
        target_json,
        now,
    )
