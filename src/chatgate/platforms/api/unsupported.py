"""Parameters the gateway cannot honour: a 400 naming the parameter, never silently ignored.

A client that asks for two choices (``n``), its own tools, log probabilities or a JSON schema
and gets an ordinary answer would act on something it did not get; OpenAI answers a parameter
it cannot use with a 400 naming it (``param``), and so does the gateway. Sampling options
(``temperature``, ``top_p``, ``max_tokens``, ``seed``, ...) stay accepted and ignored: the
answer is still an answer to the question asked. See docs/api.md for the table.
"""

from __future__ import annotations

from typing import Any

from chatgate.platforms.api.errors import ApiError

_TOOLS = "the gateway runs its own tools and does not forward a client's tools to the model"


def _unsupported(param: str, why: str) -> ApiError:
    return ApiError(400, "unsupported_parameter", f"{param}: {why}", param=param)


def _set(data: dict[str, Any], name: str) -> bool:
    """Present with a value that asks for something (an empty list or false asks for nothing)."""
    value = data.get(name)
    return value is not None and value is not False and value != [] and value != {}


def check_chat(data: dict[str, Any]) -> None:
    """Raise for the first chat completion parameter the gateway cannot honour."""
    n = data.get("n")
    if n is not None and n != 1:
        raise _unsupported("n", "only one choice per request is supported (n=1)")
    for name in ("tools", "functions"):
        if _set(data, name):
            raise _unsupported(name, _TOOLS)
    for name in ("tool_choice", "function_call"):
        if _set(data, name) and data[name] not in ("none", "auto"):
            raise _unsupported(name, _TOOLS)
    if _set(data, "logprobs") or _set(data, "top_logprobs"):
        raise _unsupported("logprobs" if _set(data, "logprobs") else "top_logprobs", "not supported")
    fmt = data.get("response_format")
    if _set(data, "response_format") and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        raise _unsupported("response_format", "only plain text answers are supported")
    modalities = data.get("modalities")
    if _set(data, "modalities") and modalities != ["text"]:
        raise _unsupported("modalities", "only text is supported")
    for name in ("audio", "prediction"):
        if _set(data, name):
            raise _unsupported(name, "not supported")


def check_responses(data: dict[str, Any]) -> None:
    """Raise for the first Responses API parameter the gateway cannot honour."""
    if _set(data, "tools"):
        raise _unsupported("tools", _TOOLS)
    choice = data.get("tool_choice")
    if _set(data, "tool_choice") and choice not in ("none", "auto"):
        raise _unsupported("tool_choice", _TOOLS)
    text = data.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") not in (None, "text"):
        raise _unsupported("text.format", "only plain text answers are supported")
