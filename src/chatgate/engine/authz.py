"""Who may talk to the agent. Default deny: an allowlist or allow_all grants access."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from chatgate.domain.source import Source


@dataclass(frozen=True, slots=True)
class PlatformAccess:
    allow_all: bool = False
    allow_users: frozenset[str] = field(default_factory=frozenset)


class Authorizer:
    def __init__(self, rules: Mapping[str, PlatformAccess]) -> None:
        self._rules = dict(rules)

    def check(self, source: Source) -> str | None:
        """Return ``None`` when allowed, else the reason for refusing."""
        rule = self._rules.get(source.platform)
        if rule is None:
            return f"platform {source.platform!r} is not enabled"
        if rule.allow_all:
            return None
        if source.user_id is not None and source.user_id in rule.allow_users:
            return None
        return f"user {source.user_id!r} is not on the {source.platform} allowlist"
