"""Interactions: how each intake answer is shown within Discord's 3 seconds, and the tokens
that replies follow up on.

An interaction is admitted first, then answered: deferred ("thinking…", type 5) when it
starts a turn, a silent deferred update (type 6) for an approval press that won (the prompt
is edited into its outcome), and an ephemeral message (type 4, flag 64) for a refusal, a
press that lost, or a storage outage (the person is asked to try again: Discord never
redelivers an interaction). The token is good for follow-ups for 15 minutes; the adapter
keeps the latest one per chat and user (in memory: after a restart a reply goes to the
channel instead, the same as after the token expired).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from chatgate.engine.ports import Admitted, IntakeAnswer, Refused

DEFERRED_MESSAGE, DEFERRED_UPDATE, MESSAGE = 5, 6, 4
EPHEMERAL = 64
TOKEN_LIFETIME = 15 * 60.0
TOKEN_MARGIN = 30.0
"""A follow-up is not started in the last half minute of a token's life."""
MAX_TOKENS = 10_000
UNAVAILABLE_TEXT = "Sorry, that could not be saved just now. Please try again in a moment."


def ephemeral(text: str) -> dict[str, Any]:
    return {"type": MESSAGE, "data": {"content": text[:2000], "flags": EPHEMERAL}}


def response_for(answer: IntakeAnswer | None) -> dict[str, Any] | None:
    """The callback body for an intake answer (``None``: a recognized replay, already answered)."""
    if answer is None:
        return ephemeral(UNAVAILABLE_TEXT)
    if isinstance(answer, Refused):
        return ephemeral(answer.message or "This is not something I can do.")
    if not isinstance(answer, Admitted):
        return ephemeral(UNAVAILABLE_TEXT)
    if not answer.new:
        return None
    if answer.answer is not None:
        return {"type": DEFERRED_UPDATE} if answer.answer.won else ephemeral(answer.answer.text)
    return {"type": DEFERRED_MESSAGE}


class FollowUp(msgspec.Struct, frozen=True):
    token: str
    expires: float


class InteractionTokens:
    """The latest deferred interaction per (chat, user), while its token can be followed up."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._by_chat: dict[tuple[str, str], FollowUp] = {}

    def remember(self, chat_id: str, user_id: str, token: str, received: float) -> None:
        now = self._clock()
        if len(self._by_chat) >= MAX_TOKENS:
            self._by_chat = {k: v for k, v in self._by_chat.items() if v.expires > now}
            while len(self._by_chat) >= MAX_TOKENS:
                self._by_chat.pop(next(iter(self._by_chat)))
        self._by_chat[(chat_id, user_id)] = FollowUp(token, received + TOKEN_LIFETIME - TOKEN_MARGIN)

    def valid(self, chat_id: str, user_id: str | None) -> str | None:
        found = self._by_chat.get((chat_id, user_id or ""))
        if found is None:
            return None
        if found.expires <= self._clock():
            del self._by_chat[(chat_id, user_id or "")]
            return None
        return found.token

    def forget(self, chat_id: str, user_id: str | None) -> None:
        self._by_chat.pop((chat_id, user_id or ""), None)
