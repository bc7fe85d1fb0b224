"""``/model`` and the profile line of ``/status``: a session's model profile, chosen in its chat.

``/model NAME`` records the session's choice by its session key (``SessionProfiles``), so it
holds for this session only, across ``/new`` and restarts; ``/model`` alone lists the profiles
and marks the session's. ``/status`` is the usual status with the session's profile added.
"""

from __future__ import annotations

import time
from typing import Protocol

from chatgate.domain.inbound import Inbound
from chatgate.domain.profiles import ModelProfile, Profiles
from chatgate.domain.store_roles import SessionProfiles, Transcript
from chatgate.engine.commands import COMMAND_TABLE


class ModelStore(SessionProfiles, Transcript, Protocol):
    """Where the profile is kept, and the session read ``/status`` shows."""


def _label(profile: ModelProfile) -> str:
    facts = [profile.model] if profile.model else []
    if profile.context_length is not None:
        facts.append(f"{profile.context_length} tokens")
    if profile.vision:
        facts.append("vision")
    return f"{profile.name} ({', '.join(facts)})" if facts else profile.name


class ModelCommands:
    def __init__(self, store: ModelStore, profiles: Profiles) -> None:
        self._store = store
        self._profiles = profiles

    async def _current(self, session_key: str) -> ModelProfile:
        return self._profiles.resolve(await self._store.session_profile(session_key))

    async def model(self, inbound: Inbound, session_key: str, args: str) -> str:
        """Switch (idempotent: a redelivered ``/model NAME`` records the same choice) or list."""
        current = await self._current(session_key)
        if not args:
            lines = ["Model profiles (/model NAME switches this chat's session):"]
            lines += [f"{'→' if p.name == current.name else '-'} {_label(p)}" for p in self._profiles.all]
            return "\n".join(lines)
        chosen = self._profiles.get(args.split()[0])
        if chosen is None:
            names = ", ".join(self._profiles.names)
            return f"No model profile {args.split()[0][:64]!r}. The profiles: {names}."
        await self._store.set_session_profile(session_key, chosen.name, time.time())
        if chosen.name == current.name:
            return f"This session already uses {_label(chosen)}."
        return f"Switched this session to {_label(chosen)} (was {current.name}). Other chats keep theirs."

    async def status(self, inbound: Inbound, session_key: str, args: str) -> str:
        text = await COMMAND_TABLE["status"].reply(session_key, self._store)
        return f"{text}\nModel profile: {_label(await self._current(session_key))}"
