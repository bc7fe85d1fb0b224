"""Which scope (Slack workspace, Discord guild) each session key belongs to.

The relay contract's session key leaves the scope out, and a Slack channel id is unique
only within its workspace. The store binds a key to the scope of its first message and
refuses another scope's (``ScopeConflict``); this cache lets admission pick the scoped
key up front without a read per message. It only ever answers a hint: a wrong answer
costs one refused transaction and a retry, never a shared session.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from chatgate.domain.source import Source


class SessionSources(Protocol):
    async def session_source(self, session_key: str) -> Source | None: ...


class ScopeBindings:
    def __init__(self, store: SessionSources, max_keys: int = 10_000) -> None:
        self._store = store
        self._scope_of: OrderedDict[str, str] = OrderedDict()
        self._max_keys = max_keys

    async def bound_elsewhere(self, key: str, scope: str) -> bool:
        """True when the session under ``key`` belongs to a scope other than ``scope``."""
        bound = self._scope_of.get(key)
        if bound is None:
            stored = await self._store.session_source(key)
            bound = scope if stored is None else (stored.scope_id or "")
            self._remember(key, bound)
        else:
            self._scope_of.move_to_end(key)
        return bound != scope

    def forget(self, key: str) -> None:
        self._scope_of.pop(key, None)

    def _remember(self, key: str, scope: str) -> None:
        self._scope_of[key] = scope
        if len(self._scope_of) > self._max_keys:
            self._scope_of.popitem(last=False)
