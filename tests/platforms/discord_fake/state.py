"""What the fake Discord knows: guilds, channels, users, messages, and how ids are made.

Ids are snowflakes like Discord's (milliseconds since the Discord epoch in the top bits), so an
adapter that reads a message's time from its id (catch-up's ``catch_up_hours``) reads a true one.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

DISCORD_EPOCH_MS = 1_420_070_400_000
BOT_ID = "900000000000000001"
APP_ID = "900000000000000002"
TOKEN = "fake-discord-bot-token.do-not-log.XyZ"
TOKEN_ENV = "DISCORD_TEST_BOT_TOKEN"
GUILD_TEXT, DM, ANNOUNCEMENT_THREAD, PUBLIC_THREAD, PRIVATE_THREAD, FORUM = 0, 1, 10, 11, 12, 15

_counter = itertools.count()


def snowflake(at: float | None = None) -> str:
    ms = int((time.time() if at is None else at) * 1000) - DISCORD_EPOCH_MS
    return str((ms << 22) | (next(_counter) & 0x3FFFFF))


@dataclass
class User:
    id: str
    username: str
    global_name: str | None = None
    bot: bool = False

    def wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "username": self.username,
            "global_name": self.global_name,
            "discriminator": "0",
            "avatar": None,
            "bot": self.bot,
        }


BOT = User(BOT_ID, "chatgate-bot", None, bot=True)


@dataclass
class Channel:
    id: str
    type: int
    name: str | None = None
    guild_id: str | None = None
    parent_id: str | None = None
    topic: str | None = None
    recipient: User | None = None

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "type": self.type}
        if self.guild_id is not None:
            out.update(guild_id=self.guild_id, name=self.name, position=0, permission_overwrites=[])
            out.update(topic=self.topic, nsfw=False, parent_id=self.parent_id)
        if self.type in (ANNOUNCEMENT_THREAD, PUBLIC_THREAD, PRIVATE_THREAD):
            out.update(owner_id=BOT_ID, member_count=1, message_count=0)
            out["thread_metadata"] = {"archived": False, "auto_archive_duration": 1440, "locked": False,
                                      "archive_timestamp": "2026-01-01T00:00:00+00:00"}  # fmt: skip
        if self.recipient is not None:
            out["recipients"] = [self.recipient.wire()]
        return out


@dataclass
class Guild:
    id: str
    name: str
    channels: list[Channel] = field(default_factory=list)
    roles: dict[str, str] = field(default_factory=dict)
    """role id -> name."""

    def wire(self) -> dict[str, Any]:
        text = [
            c.wire()
            for c in self.channels
            if c.type not in (ANNOUNCEMENT_THREAD, PUBLIC_THREAD, PRIVATE_THREAD)
        ]
        threads = [
            c.wire() for c in self.channels if c.type in (ANNOUNCEMENT_THREAD, PUBLIC_THREAD, PRIVATE_THREAD)
        ]
        roles = [{"id": self.id, "name": "@everyone", "permissions": "0", "position": 0, "color": 0,
                  "hoist": False, "managed": False, "mentionable": False}]  # fmt: skip
        roles += [{"id": rid, "name": name, "permissions": "0", "position": 1, "color": 0, "hoist": False,
                   "managed": False, "mentionable": True} for rid, name in self.roles.items()]  # fmt: skip
        return {
            "id": self.id, "name": self.name, "owner_id": "1", "features": [], "emojis": [], "stickers": [],
            "roles": roles, "channels": text, "threads": threads, "members": [], "voice_states": [],
            "presences": [], "member_count": 2, "large": False, "unavailable": False,
            "joined_at": "2026-01-01T00:00:00+00:00", "premium_tier": 0, "preferred_locale": "en-US",
        }  # fmt: skip


@dataclass
class Message:
    id: str
    channel: Channel
    author: User
    content: str
    nick: str | None = None
    roles: list[str] = field(default_factory=list)
    mentions: list[User] = field(default_factory=list)
    reference: str | None = None
    attachments: list[dict[str, Any]] = field(default_factory=list)
    components: list[dict[str, Any]] = field(default_factory=list)
    edited: bool = False
    edited_at: str = "2026-01-01T00:00:01+00:00"
    deleted: bool = False

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id, "channel_id": self.channel.id, "author": self.author.wire(),
            "content": self.content, "timestamp": "2026-01-01T00:00:00+00:00",
            "edited_timestamp": self.edited_at if self.edited else None,
            "tts": False, "mention_everyone": False, "mentions": [u.wire() for u in self.mentions],
            "mention_roles": [], "attachments": self.attachments, "embeds": [], "pinned": False,
            "type": 19 if self.reference else 0, "flags": 0, "components": self.components,
        }  # fmt: skip
        if self.channel.guild_id is not None:
            out["guild_id"] = self.channel.guild_id
            out["member"] = {"nick": self.nick, "roles": self.roles, "joined_at": "2026-01-01T00:00:00+00:00",
                             "deaf": False, "mute": False, "flags": 0}  # fmt: skip
        if self.reference is not None:
            out["message_reference"] = {"message_id": self.reference, "channel_id": self.channel.id,
                                        "type": 0}  # fmt: skip
        return out


@dataclass
class Call:
    """One REST call the fake received: what tests read to check what the adapter did."""

    method: str
    path: str
    body: Any
    status: int
    at: float
