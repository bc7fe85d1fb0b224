"""``platforms.discord``: the keys of the Discord section (docs/platforms/discord.md)."""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from chatgate.platforms.discord.endpoint import DEFAULT_API_BASE
from chatgate.platforms.kit.section import EnvName, PlatformSection


class DiscordSection(PlatformSection, kw_only=True):
    numbers_as_text: ClassVar[bool] = True

    token_env: EnvName | None = None
    """Name of the environment variable that holds the bot token (required when enabled)."""
    allow_users: list[str] = []
    """Discord user ids allowed to talk to the agent; everyone else is refused (default deny)."""
    allow_roles: list[str] = []
    """Role ids whose members may talk to the agent in a guild, besides ``allow_users``."""
    allow_all: bool = False
    allow_channels: list[str] = []
    """Channel ids (a thread counts as its parent's) the bot answers in; empty: every channel."""
    require_mention: bool = True
    """In a guild, answer only messages that mention the bot or reply to it."""
    free_response_channels: list[str] = []
    """Channel ids where every message is for the bot, mention or not."""
    pairing: bool = False
    """Strangers who write in a DM get a one-time code for the operator (``chatgate pairing``)."""
    catch_up_hours: Annotated[float, msgspec.Meta(ge=0, le=24 * 30)] = 24.0
    """After downtime, read back what channels active this recently got meanwhile (0: none)."""
    command_guilds: list[str] = []
    """Guild ids to register the slash commands in (instant); empty: globally."""
    register_commands: bool = True
    status_reactions: bool = False
    """React 👀 to a person's message from admission until its answer is delivered."""
    api_base: str = DEFAULT_API_BASE
    """Discord's REST base; tests point it at a fake Discord (the gateway URL comes from it)."""
