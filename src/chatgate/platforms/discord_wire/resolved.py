"""Who and where a relayed Discord interaction is: its source, and what its resolved ids name."""

from __future__ import annotations

from typing import Any

from chatgate.domain.inbound import Attachment
from chatgate.domain.source import ChatType, Source
from chatgate.platforms.discord_wire.json_reads import (
    fail,
    first_label,
    need_str,
    opt_int,
    opt_obj,
    opt_str,
)

PLATFORM = "discord"
THREAD_CHANNEL_TYPES = frozenset({10, 11, 12})


def resolved_item(resolved: dict[str, Any], section: str, item_id: str) -> dict[str, Any] | None:
    table = resolved.get(section)
    entry = table.get(item_id) if isinstance(table, dict) else None
    return entry if isinstance(entry, dict) else None


def source_of(data: dict[str, Any]) -> Source:
    guild_id = opt_str(data, "guild_id", "interaction")
    channel = opt_obj(data, "channel", "interaction")
    channel_id = opt_str(data, "channel_id", "interaction")
    inner_id = opt_str(channel, "id", "interaction.channel") if channel is not None else None
    if channel_id and inner_id and channel_id != inner_id:
        fail(f"interaction.channel_id {channel_id!r} and channel.id {inner_id!r} disagree")
    chat_id = channel_id or inner_id
    if chat_id is None:
        fail("interaction has no channel (channel_id or channel.id)")
    channel_type = opt_int(channel, "type", "interaction.channel") if channel is not None else None
    thread_id = parent_id = None
    chat_type: ChatType
    if channel is not None and channel_type in THREAD_CHANNEL_TYPES:
        chat_type, thread_id = "thread", chat_id
        parent_id = opt_str(channel, "parent_id", "interaction.channel")
    else:
        chat_type = "group" if guild_id else "dm"
    member = opt_obj(data, "member", "interaction")
    # A DM (or an app installed by the user, outside the guild) has a user and no member.
    user = opt_obj(data, "user", "interaction") if member is None else opt_obj(member, "user", "member")
    if user is None:
        fail("interaction has no user (member.user or user)")
    name = first_label(member, "nick") or first_label(user, "global_name", "username")
    return Source(
        platform=PLATFORM,
        chat_id=chat_id,
        chat_type=chat_type,
        user_id=need_str(user, "id", "interaction.user"),
        user_name=name,
        thread_id=thread_id,
        parent_chat_id=parent_id,
        scope_id=guild_id,
    )


def user_name(resolved: dict[str, Any], user_id: str) -> str | None:
    return first_label(resolved_item(resolved, "members", user_id), "nick") or first_label(
        resolved_item(resolved, "users", user_id), "global_name", "username"
    )


def resolved_name(resolved: dict[str, Any], kind: str, item_id: str) -> str | None:
    if kind in ("user", "mentionable") and (name := user_name(resolved, item_id)):
        return name
    if kind in ("role", "mentionable"):
        return first_label(resolved_item(resolved, "roles", item_id), "name")
    if kind == "channel":
        return first_label(resolved_item(resolved, "channels", item_id), "name")
    if kind == "attachment":
        return first_label(resolved_item(resolved, "attachments", item_id), "filename")
    return None


def attachment_of(resolved: dict[str, Any], item_id: str) -> Attachment:
    found = resolved_item(resolved, "attachments", item_id) or {}
    size = found.get("size")
    return Attachment(
        kind="document",
        ref=first_label(found, "url") or item_id,
        mime=first_label(found, "content_type"),
        name=first_label(found, "filename"),
        size=size if isinstance(size, int) and not isinstance(size, bool) else None,
    )
