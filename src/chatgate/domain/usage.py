"""Token usage of a turn: the model's own count when it gives one, else a marked estimate.

An API client bills or budgets by ``usage``; a number the gateway made up must never pass
for the model's. So a ``Usage`` says whether it is ``estimated``, and the estimate is the
rough rule of about four characters a token (``estimate_tokens``), good enough to budget
by and to trim a history (``domain/trimming.py``), never exact.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import msgspec

CHARS_PER_TOKEN = 4
"""The rough rule for English text and code with common BPE tokenizers (cl100k and kin)."""

USAGE_KEY = "usage"
"""Outbox target key of a final's usage (``Usage.dumps``), read back by the API."""


def estimate_tokens(text: str) -> int:
    """About four characters a token, rounded up: a non-empty text is at least one token."""
    return -(-len(text) // CHARS_PER_TOKEN)


class Usage(msgspec.Struct, frozen=True):
    prompt_tokens: int
    completion_tokens: int
    estimated: bool = False
    """True when the model reported nothing and these are ``estimate_tokens`` counts."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        """Two model calls of one turn (a tool loop): their counts add up."""
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.estimated or other.estimated,
        )

    def dumps(self) -> str:
        body: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }
        if self.estimated:
            body["estimated"] = True
        return json.dumps(body, separators=(",", ":"))

    @staticmethod
    def loads(text: object) -> Usage | None:
        """What ``dumps`` wrote; None for anything else (a row from before usage was kept)."""
        try:
            body = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            return None
        return Usage.of(body, estimated=bool(body.get("estimated"))) if isinstance(body, dict) else None

    @staticmethod
    def of(body: object, *, estimated: bool = False) -> Usage | None:
        """A model's ``usage`` object (OpenAI's shape); None when it is missing or not one."""
        if not isinstance(body, dict):
            return None
        prompt, completion = body.get("prompt_tokens"), body.get("completion_tokens")
        if not isinstance(prompt, int) or not isinstance(completion, int):
            return None
        return Usage(max(prompt, 0), max(completion, 0), estimated)


def estimate_usage(prompt: Iterable[str], completion: str) -> Usage:
    """The marked estimate for a turn the model reported no usage for."""
    return Usage(sum(estimate_tokens(text) for text in prompt), estimate_tokens(completion), estimated=True)
