"""Slash commands from the control-command table and ``/ask``, registered only when they changed.

``GET`` the application's commands (global, or each configured guild's), compare what
matters (type, name, description, options) and ``PUT`` the whole set only when it differs,
so a restart does not re-register unchanged commands (Discord limits command creation to
200 a day per guild). Each command carries the typed options of ``domain.command_options``
(``/ask prompt:``, ``/remind when: prompt:``...); the comparison reads only the fields we
set, since Discord's answer adds its own (ids, versions, localizations). A message
context-menu entry lets people hand a message to the agent.
"""

from __future__ import annotations

import logging
from typing import Any

from chatgate.domain.command_options import OptionSpec, slash_commands
from chatgate.domain.errors import PlatformCallError
from chatgate.platforms.discord.rest import DiscordRest

log = logging.getLogger(__name__)
CHAT_INPUT, USER_MENU, MESSAGE_MENU = 1, 2, 3
MESSAGE_MENU_NAME = "Ask the agent"


STRING = 3


def _option(spec: OptionSpec) -> dict[str, Any]:
    option: dict[str, Any] = {
        "type": STRING,
        "name": spec.name,
        "description": spec.description[:100],
        "required": spec.required,
        "max_length": spec.max_length,
    }
    if spec.choices:
        option["choices"] = [{"name": c, "value": c} for c in spec.choices]
    return option


def desired_commands() -> list[dict[str, Any]]:
    commands: list[dict[str, Any]] = []
    for name, summary, options in slash_commands():
        command: dict[str, Any] = {"type": CHAT_INPUT, "name": name, "description": summary[:100] or name}
        if options:
            command["options"] = [_option(o) for o in options]
        commands.append(command)
    commands.append({"type": MESSAGE_MENU, "name": MESSAGE_MENU_NAME, "description": ""})
    return commands


def _option_shape(option: Any) -> tuple[Any, ...]:
    if not isinstance(option, dict):
        return (repr(option),)
    choices = tuple(
        (c.get("name"), c.get("value")) for c in option.get("choices") or () if isinstance(c, dict)
    )
    fields = ("type", "name", "description", "max_length")
    return (*(option.get(f) for f in fields), bool(option.get("required")), choices)


def _shape(command: dict[str, Any]) -> tuple[Any, ...]:
    kind = command.get("type", CHAT_INPUT)
    description = command.get("description", "") if kind == CHAT_INPUT else ""
    options = tuple(_option_shape(o) for o in command.get("options") or ())
    return (kind, command.get("name"), description, repr(options))


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
