"""The dedupe keys of what a browser sends: a message's and a button tap's, per chat."""

from __future__ import annotations


def web_delivery_id(chat_id: str, message_id: str) -> str:
    """Unambiguous per-chat dedupe key: the length prefix keeps ("a/b", "c") apart from ("a", "b/c")."""
    return f"{len(chat_id)}:{chat_id}/{message_id}"


def web_button_delivery_id(chat_id: str, button_id: str) -> str:
    """A button's dedupe key: ``#`` where a message's has ``/``, so the two never collide."""
    return f"{len(chat_id)}:{chat_id}#{button_id}"
