"""Outbound action ops: check one against the platform's descriptor and apply it to the simulated chat.

A result is ``{"success": bool, "message_id"?: str, "error"?: str}``. Every refusal
carries a reason the gateway engineer can act on, never a bare failure.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from relaysim.descriptors import SIMULATED_OPS, allowed_ops, max_length, measure
from relaysim.state import SimMessage

_STRING_FIELDS: dict[str, tuple[str, ...]] = {
    "send": ("chat_id", "content"),
    "edit": ("chat_id", "message_id", "content"),
    "typing": ("chat_id",),
    "follow_up": ("session_key", "kind", "content"),
    "prompt": ("chat_id", "prompt_id", "content"),
    "react": ("chat_id", "message_id", "emoji"),
    "delete": ("chat_id", "message_id"),
    "draft": ("chat_id", "content"),
    "task_card": ("chat_id", "card_id"),
    "task_card_stop": ("chat_id", "card_id"),
    "send_media": ("chat_id", "media_kind", "source_url"),
}
MEDIA_KINDS = frozenset({"image", "voice", "audio", "video", "document"})
_CONTENT_OPS = frozenset({"send", "edit", "follow_up", "prompt", "draft"})
MAX_DRAFT_ID = 2**53
"""Draft ids are plain integers below 2^53 (the connector is JavaScript)."""


def failure(error: str) -> dict[str, Any]:
    return {"success": False, "error": error}


def check(action: Mapping[str, Any], descriptor: Mapping[str, Any]) -> str | None:
    """Why this action would be refused by the platform, or None if it is acceptable."""
    op = action.get("op")
    platform = descriptor["platform"]
    if not isinstance(op, str) or not op:
        return "action has no op"
    if op not in allowed_ops(descriptor):
        return f"op {op!r} is not supported on {platform} (not in the descriptor's supported_ops)"
    if op not in SIMULATED_OPS:
        return f"op {op!r} is advertised but not simulated"
    for name in _STRING_FIELDS[op]:
        if not isinstance(action.get(name), str):
            return f"{op}: {name} must be a string"
    if op in _CONTENT_OPS:
        content = str(action["content"])
        if not content.strip():
            return f"{op}: content is empty"
        unit = str(descriptor["len_unit"])
        size, limit = measure(content, unit), max_length(descriptor)
        if size > limit:
            return f"{op}: content is {size} {unit}; {platform} allows {limit}"
    if op == "send" and not isinstance(action.get("reply_to") or "", str):
        return "send: reply_to must be a string"
    if op == "send" and not isinstance(action.get("metadata") or {}, dict):
        return "send: metadata must be an object"
    if op == "prompt":
        return _check_options(action.get("options"))
    if op == "draft":
        return _check_draft(action)
    if op == "task_card":
        return _check_chunks(action.get("chunks"))
    if op == "send_media":
        return _check_media(action)
    return None


def _check_media(action: Mapping[str, Any]) -> str | None:
    if action["media_kind"] not in MEDIA_KINDS:
        return f"send_media: media_kind must be one of {', '.join(sorted(MEDIA_KINDS))}"
    if not str(action["source_url"]).startswith(("http://", "https://")):
        return "send_media: source_url must be an http(s) URL"
    if not isinstance(action.get("caption") or "", str):
        return "send_media: caption must be a string"
    return None


def _check_chunks(chunks: Any) -> str | None:
    if not isinstance(chunks, list) or not chunks:
        return "task_card: chunks must be a non-empty list"
    for chunk in chunks:
        if not isinstance(chunk, dict) or not all(
            isinstance(chunk.get(k), str) for k in ("id", "title", "status")
        ):
            return "task_card: every chunk needs string id, title and status"
    return None


def _check_draft(action: Mapping[str, Any]) -> str | None:
    draft_id = action.get("draft_id")
    if not isinstance(draft_id, int) or isinstance(draft_id, bool) or not 0 <= draft_id < MAX_DRAFT_ID:
        return "draft: draft_id must be an integer in [0, 2^53)"
    if not isinstance(action.get("final", False), bool):
        return "draft: final must be a boolean"
    return None


def _check_options(options: Any) -> str | None:
    if not isinstance(options, list) or not options:
        return "prompt: options must be a non-empty list"
    for option in options:
        if not isinstance(option, dict) or not isinstance(option.get("id"), str):
            return "prompt: every option needs a string id"
        if not isinstance(option.get("label"), str):
            return "prompt: every option needs a string label"
    return None


def apply_draft(action: Mapping[str, Any], platform: str, messages: dict[str, SimMessage]) -> dict[str, Any]:
    """A draft frame: the first opens a streaming message, each later one replaces its text with
    the cumulative content, ``final`` seals it; a frame for a sealed draft changes nothing and
    answers the stream's message id (a straggler cannot reopen it)."""
    chat, draft_id, content = str(action["chat_id"]), int(action["draft_id"]), str(action["content"])
    known = next(
        (
            m
            for m in messages.values()
            if m.platform == platform and m.chat_id == chat and m.draft_id == draft_id
        ),
        None,
    )
    if known is None:
        message_id = uuid.uuid4().hex[:16]
        known = messages[message_id] = SimMessage(
            message_id, platform, chat, content, "draft", draft_id=draft_id
        )
        known.streaming = not action.get("final", False)
        return {"success": True, "message_id": message_id}
    if known.streaming:
        known.rewrites += not content.startswith(known.content) and not action.get("final", False)
        known.content = content
        known.edits += 1
        known.streaming = not action.get("final", False)
    return {"success": True, "message_id": known.message_id}


def apply_card(action: Mapping[str, Any], platform: str, messages: dict[str, SimMessage]) -> dict[str, Any]:
    """A task card is a message whose content is its tasks as ``id:status`` lines; stop ends it."""
    card_id, chat = str(action["card_id"]), str(action["chat_id"])
    message_id = f"card-{card_id}"
    known = messages.get(message_id)
    if action["op"] == "task_card_stop":
        if known is None:
            return failure(f"task_card_stop: no card {card_id!r}")
        known.streaming = False
        return {"success": True, "message_id": message_id}
    content = "\n".join(f"{c['title']}:{c['status']}" for c in action["chunks"])
    if known is None:
        known = messages[message_id] = SimMessage(message_id, platform, chat, content, "task_card")
        known.streaming = True
    elif known.streaming:
        known.content = content
        known.edits += 1
    return {"success": True, "message_id": message_id}


def apply(action: Mapping[str, Any], platform: str, messages: dict[str, SimMessage]) -> dict[str, Any]:
    """Apply a checked action to the simulated chat and return its success result."""
    op = str(action["op"])
    if op == "draft":
        return apply_draft(action, platform, messages)
    if op in ("task_card", "task_card_stop"):
        return apply_card(action, platform, messages)
    if op == "send_media":
        message_id = uuid.uuid4().hex[:16]
        messages[message_id] = SimMessage(
            message_id, platform, str(action["chat_id"]), str(action.get("caption") or ""), op,
            media_kind=str(action["media_kind"]), source_url=str(action["source_url"]),
        )  # fmt: skip
        return {"success": True, "message_id": message_id}
    if op in ("send", "follow_up", "prompt"):
        message_id = uuid.uuid4().hex[:16]
        chat = str(action.get("chat_id") or action.get("session_key"))
        messages[message_id] = SimMessage(message_id, platform, chat, str(action["content"]), op)
        return {"success": True, "message_id": message_id}
    known = messages.get(str(action.get("message_id")))
    if op == "edit" and known is not None:
        known.content = str(action["content"])
        known.edits += 1
    if op == "delete" and known is not None:
        known.deleted = True
    return {"success": True}
