"""A session's transcript as the agent reads it back: what was said, by whom."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One transcript row: written by a turn's commit, read as the next turn's history."""

    role: Role
    content: str
