"""The pinned session context: the system prompt that describes a session.

It is a pure function of stable inputs so the model provider's prompt cache
keeps hitting: per-turn facts (message id, time, who spoke in a shared
session) go into the turn input instead (see ``render_turn_input``).
"""

from __future__ import annotations

import msgspec

from chatgate.domain.source import Source


class ChatLabels(msgspec.Struct, frozen=True):
    """The latest observed human labels of a chat."""

    chat_name: str | None = None
    chat_topic: str | None = None


def _inline(value: str, limit: int = 200) -> str:
    """Collapse an untrusted label onto one inert line."""
    text = " ".join(value.replace("\r", " ").replace("\n", " ").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_session_context(
    source: Source, labels: ChatLabels, *, shared: bool, platform_label: str | None = None
) -> str:
    lines = ["## Conversation", f"Platform: {platform_label or source.platform}"]
    kind = {
        "dm": "direct message",
        "group": "group chat",
        "channel": "channel",
        "thread": "thread",
        "forum": "forum topic",
    }[source.chat_type]
    name = _inline(labels.chat_name) if labels.chat_name else None
    if source.chat_type == "dm":
        lines.append(f"Chat: {kind}")
    elif source.thread_id and source.parent_chat_id:
        lines.append(f"Chat: {kind} {name or source.thread_id} in parent {source.parent_chat_id}")
    else:
        lines.append(f"Chat: {kind} {name or source.chat_id or '(unnamed)'}")
    if labels.chat_topic:
        lines.append(f"Topic: {_inline(labels.chat_topic)}")
    if shared:
        lines.append("Participants: several people share this conversation; each message names its sender.")
    else:
        who = _inline(source.user_name) if source.user_name else None
        ident = source.user_id or "unknown"
        lines.append(f"User: {who} (id {ident})" if who else f"User: id {ident}")
    return "\n".join(lines) + "\n"


def render_turn_input(text: str, *, sender: str | None, shared: bool) -> str:
    """What the model sees for one message; the sender is named only when shared."""
    if shared and sender:
        return f"[{_inline(sender, 80)}] {text}"
    return text
