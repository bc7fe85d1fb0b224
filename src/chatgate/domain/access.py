"""Who may talk on a platform: the rule a platform's config gives admission (default deny)."""

from __future__ import annotations

import msgspec


class PlatformAccess(msgspec.Struct, frozen=True):
    allow_all: bool = False
    allow_users: frozenset[str] = msgspec.field(default_factory=frozenset)
    pairing: bool = False
    """Strangers in a direct message are offered a pairing code; approved users are allowed."""
    allow_suffixes: frozenset[str] = msgspec.field(default_factory=frozenset)
    """User ids ending with one of these are allowed too: a platform whose ids have a hierarchy
    (an email address's ``@example.com``) allows a whole part of it."""

    def allows(self, user_id: str | None) -> bool:
        """The rule alone (pairing approvals aside)."""
        if self.allow_all:
            return True
        if user_id is None:
            return False
        return user_id in self.allow_users or any(user_id.endswith(s) for s in self.allow_suffixes)
