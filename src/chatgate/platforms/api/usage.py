"""The ``usage`` of an answer as the API reports it: the turn's recorded count, else an estimate.

A turn records the model's own usage with its final (``domain/usage.py``), or a marked
estimate when the model gave none. An answer with nothing recorded (a control command's
reply, a row from an older gateway, a store that could not be read) is estimated here from
the request's text and the answer. Every estimate carries ``"estimated": true`` in its
``usage`` object, a field OpenAI's own never has; the model's own counts never carry it.
"""

from __future__ import annotations

from typing import Any

from chatgate.domain.api_keys import ApiExchange
from chatgate.domain.usage import Usage, estimate_usage


def usage_of(exchange: ApiExchange | None, prompt: str, answer: str) -> Usage:
    if exchange is not None and exchange.usage is not None:
        return exchange.usage
    asked = exchange.inbound_json.get("text") if exchange is not None else None
    return estimate_usage([asked if isinstance(asked, str) else prompt], answer)


def chat_usage(usage: Usage) -> dict[str, Any]:
    """A chat completion's ``usage`` object."""
    body: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    return body | ({"estimated": True} if usage.estimated else {})


def response_usage(usage: Usage) -> dict[str, Any]:
    """A response's ``usage`` object; cached and reasoning tokens are not tracked (always 0)."""
    body: dict[str, Any] = {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens,
    }
    return body | ({"estimated": True} if usage.estimated else {})
