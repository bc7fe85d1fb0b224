"""History trimmed to a profile's context length, so a long session never fails on it.

The model reads the system message (persona and pinned context), the history and this
turn's input, and writes its answer; all of it must fit the context length. The system
message and the input are always sent whole; the history keeps its newest entries that
fit what is left, dropped oldest first (a user turn and its answer go together, so the
history never starts with a lone answer). Sizes are the rough ``estimate_tokens`` (about four
characters a token): close for English and code, low for languages a tokenizer splits finer
(CJK text can be one token a character), which ``SAFETY`` leaves room for.
"""

from __future__ import annotations

from collections.abc import Sequence

from chatgate.domain.history import HistoryEntry
from chatgate.domain.profiles import ModelProfile
from chatgate.domain.usage import estimate_tokens

SAFETY = 0.8
"""The share of the context the estimate may fill: the rest absorbs its error."""
PER_MESSAGE = 4
"""Tokens a chat template adds around each message (role markers)."""


def answer_reserve(profile: ModelProfile) -> int:
    if profile.context_length is None:
        return 0
    if profile.answer_tokens is not None:
        return profile.answer_tokens
    return min(profile.context_length // 4, 4096)


def trim_history(
    history: Sequence[HistoryEntry], profile: ModelProfile, fixed: Sequence[str]
) -> tuple[HistoryEntry, ...]:
    """The newest entries of ``history`` that fit beside ``fixed`` (the system message and the
    input, always sent) and the answer's reserve; all of it when the profile has no length."""
    if profile.context_length is None:
        return tuple(history)
    budget = int(profile.context_length * SAFETY) - answer_reserve(profile)
    budget -= sum(estimate_tokens(text) + PER_MESSAGE for text in fixed)
    kept = 0
    for entry in reversed(history):
        cost = estimate_tokens(entry.content) + PER_MESSAGE
        if cost > budget:
            break
        budget -= cost
        kept += 1
    start = len(history) - kept
    while start < len(history) and history[start].role == "assistant":
        start += 1  # never open with an answer whose question was dropped
    return tuple(history[start:])
