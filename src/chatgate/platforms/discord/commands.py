"""Slash commands from the control-command table, registered only when they changed.

``GET`` the application's commands (global, or each configured guild's), compare what
matters (type, name, description, options) and ``PUT`` the whole set only when it differs,
so a restart does not re-register unchanged commands (Discord limits command creation to
200 a day per guild). A message context-menu entry lets people hand a message to the agent.
"""

from __future__ import annotations

import logging
from typing import Any

from chatgate.domain.commands import CONTROL_COMMANDS
from chatgate.domain.errors import PlatformCallError
from chatgate.platforms.discord.rest import DiscordRest

log = logging.getLogger(__name__)
CHAT_INPUT, USER_MENU, MESSAGE_MENU = 1, 2, 3
MESSAGE_MENU_NAME = "Ask the agent"


def desired_commands() -> list[dict[str, Any]]:
    commands: list[dict[str, Any]] = [
        {"type": CHAT_INPUT, "name": c.name, "description": c.summary[:100] or c.name}
        for c in CONTROL_COMMANDS
    ]
    commands.append({"type": MESSAGE_MENU, "name": MESSAGE_MENU_NAME, "description": ""})
    return commands


def _shape(command: dict[str, Any]) -> tuple[Any, ...]:
    kind = command.get("type", CHAT_INPUT)
    description = command.get("description", "") if kind == CHAT_INPUT else ""
    return (kind, command.get("name"), description, repr(command.get("options") or []))


def unchanged(existing: Any, wanted: list[dict[str, Any]]) -> bool:
    if not isinstance(existing, list):
        return False
    have = sorted(_shape(c) for c in existing if isinstance(c, dict))
    return have == sorted(_shape(c) for c in wanted)


async def register_commands(rest: DiscordRest, application_id: str, guild_ids: tuple[str, ...]) -> int:
    """Bring each scope's commands in line; returns how many scopes were written (PUT)."""
    wanted = desired_commands()
    paths = [f"/applications/{application_id}/guilds/{g}/commands" for g in guild_ids] or [
        f"/applications/{application_id}/commands"
    ]
    written = 0
    for path in paths:
        try:
            if unchanged(await rest.call("GET", path), wanted):
                continue
            await rest.call("PUT", path, wanted)
            written += 1
        except PlatformCallError as exc:
            log.warning("could not register the Discord slash commands at %s: %s", path, exc)
    return written
