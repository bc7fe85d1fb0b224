"""Model profiles: the named models a gateway offers, and which one a session uses.

A profile is an endpoint and model with its facts (``agent.profiles``); the engine needs
only its name, its context length (to trim the history, ``domain/trimming.py``), its answer
reserve and whether it reads images. The agent's own single config is the ``default``
profile. A session's choice (``/model NAME``) is stored by its session key
(``SessionProfiles``), so it outlives ``/new`` and restarts and never touches another session.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import msgspec

DEFAULT_PROFILE = "default"
PROFILE_KEY = "profile"
"""Inbound payload key: the profile one event asks for (an API request's ``model``), over the
session's own choice, for that turn only."""
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
"""What a profile may be called: it is typed after ``/model`` and sent as an API ``model``."""


class ModelProfile(msgspec.Struct, frozen=True):
    name: str
    model: str = ""
    """The model id the endpoint is asked for (shown by ``/model``)."""
    context_length: int | None = None
    """Tokens the model reads and writes per call; None: the history is not trimmed."""
    answer_tokens: int | None = None
    """Tokens kept free for the answer (``max_tokens``); None: a quarter of the context, at most 4096."""
    vision: bool = False
    """The model reads images (what the media handling checks before sending one)."""


@dataclass(frozen=True, slots=True)
class Profiles:
    """The gateway's profiles in config order; the first is the default."""

    all: tuple[ModelProfile, ...] = (ModelProfile(DEFAULT_PROFILE),)
    by_name: dict[str, ModelProfile] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {p.name.lower(): p for p in self.all})

    @property
    def default(self) -> ModelProfile:
        return self.all[0]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.all)

    def get(self, name: str | None) -> ModelProfile | None:
        """The profile called ``name`` (case-insensitive); None for an unknown or no name."""
        return self.by_name.get(name.lower()) if name else None

    def resolve(self, *names: str | None) -> ModelProfile:
        """The first of ``names`` that is a profile (a stored choice whose profile was removed
        from the config falls through), else the default."""
        for name in names:
            found = self.get(name)
            if found is not None:
                return found
        return self.default
