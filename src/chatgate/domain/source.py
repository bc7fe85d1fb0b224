"""The canonical "where and who" of an event."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec.structs import replace

ChatType = Literal["dm", "group", "channel", "thread", "forum"]
CHAT_TYPES: frozenset[str] = frozenset({"dm", "group", "channel", "thread", "forum"})


class Source(msgspec.Struct, frozen=True):
    """Where an event came from and who sent it.

    ``chat_name``/``chat_topic``/``user_name`` are observations (labels), not
    identity: they never take part in the session key.
    """

    platform: str
    chat_id: str | None
    chat_type: ChatType = "dm"
    user_id: str | None = None
    user_name: str | None = None
    thread_id: str | None = None
    parent_chat_id: str | None = None
    scope_id: str | None = None
    chat_name: str | None = None
    chat_topic: str | None = None
    user_id_alt: str | None = None

    def to_dict(self) -> dict[str, Any]:
        # Explicit rather than dataclasses.asdict: this runs for every admission (asdict's deep copy
        # was a third of the writer thread's time in bench/admission.py).
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Source:
        values: dict[str, Any] = {k: data.get(k) for k in _FIELDS if k in data}
        return canonical_source(cls(**values))


_FIELDS = Source.__struct_fields__
_ID_FIELDS = ("chat_id", "user_id", "thread_id", "parent_chat_id", "scope_id", "user_id_alt")
_LABEL_FIELDS = ("user_name", "chat_name", "chat_topic")


def _clean(value: object) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def canonical_source(source: Source) -> Source:
    """Normalize ids to stripped strings and empty values to ``None``.

    Runs once at admission so every lane (text, command, button) that names the
    same chat produces byte-identical identity fields.
    """
    changes: dict[str, Any] = {name: _clean(getattr(source, name)) for name in _ID_FIELDS}
    changes.update({name: _clean(getattr(source, name)) for name in _LABEL_FIELDS})
    platform = (_clean(source.platform) or "").lower()
    if not platform:
        raise ValueError("source.platform is required")
    chat_type = (_clean(source.chat_type) or "dm").lower()
    if chat_type not in CHAT_TYPES:
        raise ValueError(f"unknown chat_type {chat_type!r}; expected one of {sorted(CHAT_TYPES)}")
    return replace(source, platform=platform, chat_type=chat_type, **changes)


def egress_target(source: Source) -> dict[str, str]:
    """What a reply needs besides the chat id to reach the right place.

    Thread, scope and the triggering author are stored with every outbox row, so
    replies of turns no inbound frame warmed up (resumed after a restart) route
    correctly.
    """
    target = {"thread_id": source.thread_id, "scope_id": source.scope_id, "user_id": source.user_id}
    return {k: v for k, v in target.items() if v}
