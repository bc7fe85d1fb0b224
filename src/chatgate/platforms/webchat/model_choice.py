"""What the page's model picker shows (issue 34): the model profiles and the conversation's own.

The ``ready`` frame carries them; the page switches by sending ``/model NAME`` like a person
would (``engine/model_command.py`` records the choice by session key), so the picker and the
command can never disagree.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.profiles import Profiles
from chatgate.domain.source import Source
from chatgate.domain.store_roles import SessionProfiles

log = logging.getLogger(__name__)


class ModelChoice:
    def __init__(self, store: SessionProfiles, profiles: Profiles, key_of: Callable[[Source], str]) -> None:
        self._store = store
        self._profiles = profiles
        self._key_of = key_of

    async def ready_fields(self, source: Source) -> dict[str, Any]:
        """``profiles`` (names, the default first) and the session's ``profile``; nothing when
        there is only one profile (the page then shows no picker)."""
        if len(self._profiles.all) < 2:
            return {}
        try:
            chosen = await self._store.session_profile(self._key_of(source))
        except StoreUnavailable as exc:  # the page shows the default until its next hello
            log.warning("could not read the model profile of web chat %r: %s", source.chat_id, exc)
            chosen = None
        return {"profiles": list(self._profiles.names), "profile": self._profiles.resolve(chosen).name}
