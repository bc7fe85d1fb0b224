"""A session's transcript as the agent reads it back: what was said, by whom."""

from __future__ import annotations

import json
from typing import Literal

import msgspec

from chatgate.domain.media import MediaItem

Role = Literal["user", "assistant"]


class HistoryEntry(msgspec.Struct, frozen=True):
    """One transcript row: written by a turn's commit, read as the next turn's history."""

    role: Role
    content: str
    media: tuple[MediaItem, ...] = ()
    """The attachments this message sent the model (by blob sha), so later turns see them again."""

    def media_json(self) -> str | None:
        """The ``media`` column: JSON of the items, or NULL when there are none."""
        return json.dumps([m.to_dict() for m in self.media]) if self.media else None


def history_entry(role: Role, content: str, media_json: str | None) -> HistoryEntry:
    """A transcript row read back (both dialects store ``media`` as the same JSON text)."""
    media = tuple(MediaItem.from_dict(m) for m in json.loads(media_json)) if media_json else ()
    return HistoryEntry(role, content, media)
