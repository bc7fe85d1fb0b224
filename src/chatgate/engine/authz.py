"""Who may talk to the agent. Default deny: an allowlist, allow_all or a pairing approval grants access.

Pairing approvals live in the store (the operator's ``chatgate pairing approve`` writes
them from another process), so the authorizer reads a platform's approved set through
the ``PairingReads`` role and keeps it for ``cache_seconds``: an approval or a revocation
takes effect within that long, without a restart, and a busy chat costs no read per
message. A store outage while reading fails closed (``StoreUnavailable`` propagates, and
intake retries or refuses; nobody is let in on a guess).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from chatgate.domain.access import PlatformAccess as PlatformAccess
from chatgate.domain.source import Source
from chatgate.domain.store_roles import PairingReads

PAIRED_CACHE_SECONDS = 1.0


class Authorizer:
    def __init__(
        self,
        rules: Mapping[str, PlatformAccess],
        paired: PairingReads | None = None,
        *,
        cache_seconds: float = PAIRED_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rules = dict(rules)
        self._paired = paired
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}

    def check(self, source: Source) -> str | None:
        """The configured rules alone: ``None`` when allowed, else the reason for refusing."""
        rule = self._rules.get(source.platform)
        if rule is None:
            return f"platform {source.platform!r} is not enabled"
        if rule.allow_all:
            return None
        if source.user_id is not None and source.user_id in rule.allow_users:
            return None
        return f"user {source.user_id!r} is not on the {source.platform} allowlist"

    async def authorize(self, source: Source) -> str | None:
        """The rules, then the platform's pairing approvals (every lane of the platform)."""
        denied = self.check(source)
        if denied is None or not self._pairing_on(source.platform) or source.user_id is None:
            return denied
        if source.user_id in await self._approved(source.platform):
            return None
        return f"user {source.user_id!r} is neither on the {source.platform} allowlist nor paired"

    def offers_pairing(self, source: Source) -> bool:
        """A refused sender who may be offered a code: pairing is on and this is their DM."""
        return self._pairing_on(source.platform) and source.chat_type == "dm" and bool(source.user_id)

    def _pairing_on(self, platform: str) -> bool:
        rule = self._rules.get(platform)
        return rule is not None and rule.pairing and self._paired is not None

    async def _approved(self, platform: str) -> frozenset[str]:
        now = self._clock()
        cached = self._cache.get(platform)
        if cached is not None and cached[0] > now:
            return cached[1]
        assert self._paired is not None
        users = frozenset(u.user_id for u in await self._paired.paired_users(platform))
        self._cache[platform] = (now + self._cache_seconds, users)
        return users
