"""How both backends store values: JSON columns compact, sorted, UTF-8 kept as is; an outbox
draft as its columns; a conversation's id; a waiting message amended by an edit.

One module, so a row written by one backend reads the same through the other (``chatgate
store migrate`` copies rows verbatim).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from chatgate.domain.inbox import AdmitRequest
    from chatgate.domain.outbox import OutboxDraft


_ENCODER = msgspec.json.Encoder(order="sorted")
"""Compact, keys sorted, UTF-8 as is: what ``json.dumps(..., ensure_ascii=False, sort_keys=True,
separators=(",", ":"))`` writes (but a float's exponent: ``1e16``, not ``1e+16``, the same number
to any reader), in an eighth of its time: the writer thread encodes every event, its source and
every reply's target."""


def dumps(value: Any) -> str:
    try:
        return _ENCODER.encode(value).decode()
    except TypeError:  # a dict with int keys, which only ``json`` sorts: the same text, slower
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def loads(text: str | bytes) -> Any:
    """A JSON column the store wrote (``msgspec``: a third of ``json.loads``'s time)."""
    return msgspec.json.decode(text)


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


def new_session_id() -> str:
    """A conversation's id (``YYYYMMDD_HHMMSS_<8 hex>``): a session gets one when it is created
    and a new one at ``/new``."""
    return time.strftime("%Y%m%d_%H%M%S_", time.gmtime()) + uuid.uuid4().hex[:8]


def amended(original_json: str, edit: AdmitRequest) -> str:
    """A waiting message's stored event with an edit's text: the agent reads it once, as it now reads."""
    original = json.loads(original_json)
    original["text"] = edit.inbound.text
    return dumps(original)
