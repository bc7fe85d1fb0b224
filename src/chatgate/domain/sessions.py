"""A session as ``/status`` and ``chatgate sessions`` report it."""

from __future__ import annotations

import msgspec


class SessionInfo(msgspec.Struct, frozen=True):
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
