"""The JSON objects the API answers with, shaped as the OpenAI API names them."""

from __future__ import annotations

import json
from typing import Any

from chatgate.domain.prompts import Prompt


def sse(data: dict[str, Any] | str, event: str | None = None) -> str:
    """One server-sent event: ``event:`` (when named), then ``data:`` (JSON on one line)."""
    body = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (f"event: {event}\n" if event else "") + f"data: {body}\n\n"


KEEPALIVE = ": keepalive\n\n"
"""An SSE comment: keeps proxies from closing a stream that waits (for a tool, an approval)."""


def model_list(models: tuple[str, ...], created: int) -> dict[str, Any]:
    """The API's own name first (the conversation's profile), then each profile by name."""
    return {
        "object": "list",
        "data": [
            {"id": model, "object": "model", "created": created, "owned_by": "chatgate"} for model in models
        ],
    }


def completion(
    ident: str,
    created: int,
    model: str,
    text: str,
    finish: str = "stop",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": ident,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "finish_reason": finish,
                "logprobs": None,
            }
        ],
        "usage": usage,
    }


def usage_chunk(ident: str, created: int, model: str, usage: dict[str, Any]) -> dict[str, Any]:
    """The last chunk of a stream asked for with ``stream_options.include_usage``: as OpenAI
    sends it, ``choices`` empty and the whole request's ``usage``."""
    return {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage,
    }


def chunk(
    ident: str, created: int, model: str, delta: dict[str, Any], finish: str | None = None
) -> dict[str, Any]:
    return {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }


def approval(prompt: Prompt) -> dict[str, Any]:
    """What a client needs to answer a prompt: ``POST /v1/approvals/{prompt_id}``."""
    return {
        "prompt_id": prompt.prompt_id,
        "text": prompt.text,
        "options": [{"id": o.id, "label": o.label} for o in prompt.options],
        "answer_url": f"/v1/approvals/{prompt.prompt_id}",
    }


def approval_chunk(ident: str, created: int, model: str, event: dict[str, Any]) -> dict[str, Any]:
    """A chat completion chunk with an empty delta that carries an approval event in the
    ``chatgate`` extension field: never ``choices: []``, which breaks clients that read
    ``chunk.choices[0]``, and nothing in ``content``, so the deltas still add up to the final."""
    body = chunk(ident, created, model, {})
    body["chatgate"] = event
    return body


def message_item(ident: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{ident}",
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def response(
    ident: str,
    created: int,
    model: str,
    status: str,
    *,
    text: str | None = None,
    previous: str | None = None,
    conversation: str | None = None,
    extra: dict[str, Any] | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Responses API ``response`` object; ``text`` becomes its one output message."""
    failed = status == "failed"
    body: dict[str, Any] = {
        "id": f"resp_{ident}",
        "object": "response",
        "created_at": created,
        "status": status,
        "model": model,
        "output": [] if text is None or failed else [message_item(ident, text)],
        "error": {"code": "server_error", "message": text or "the agent failed"} if failed else None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": False,
        "previous_response_id": previous,
        "conversation": {"id": conversation} if conversation else None,
        "temperature": None,
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "usage": usage,
    }
    if extra:
        body["chatgate"] = extra
    return body
