"""Who may talk on a platform: the rule a platform's config gives admission (default deny)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class PlatformAccess:
    allow_all: bool = False
    allow_users: frozenset[str] = field(default_factory=frozenset)
    pairing: bool = False
    """Strangers in a direct message are offered a pairing code; approved users are allowed."""
