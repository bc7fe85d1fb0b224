"""Control commands: parsed here, answered inline by admission."""

from __future__ import annotations

import msgspec


class CommandSpec(msgspec.Struct, frozen=True):
    name: str
    summary: str
    aliases: tuple[str, ...] = ()


CONTROL_COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec("help", "list the commands"),
    CommandSpec("new", "start a fresh conversation (stops the running reply)", ("reset",)),
    CommandSpec("stop", "stop the running reply and drop queued messages"),
    CommandSpec("status", "show this session's state"),
    CommandSpec("model", "/model <name>: switch this session's model (/model alone lists them)"),
    CommandSpec("approve", "run the command waiting for approval (/approve session or always: remember it)"),
    CommandSpec("deny", "do not run the command waiting for approval"),
    CommandSpec("remind", "/remind <when> <text>: a reminder once, e.g. /remind 10m stretch"),
    CommandSpec("every", "repeat: /every 1h stretch, or cron: /every 0 9 * * 1-5 standup"),
    CommandSpec("bg", "/bg <prompt>: work on it in the background, post the answer here when done"),
    CommandSpec("tasks", "list this chat's background tasks"),
    CommandSpec("cancel", "/cancel <id>: stop a background task"),
    CommandSpec("schedules", "list this chat's schedules (/schedules pause|resume|delete <id>)"),
)

_BY_NAME: dict[str, CommandSpec] = {
    alias: spec for spec in CONTROL_COMMANDS for alias in (spec.name, *spec.aliases)
}


class Command(msgspec.Struct, frozen=True):
    name: str
    args: str


def parse_command(text: str, bot_name: str | None = None) -> Command | None:
    """Return the control command ``text`` invokes, or ``None``.

    ``/cmd@botname`` is accepted only for this bot; an unknown ``/word`` is
    not a command (it goes to the agent like any other text).
    """
    stripped = text.strip()
    if not stripped.startswith("/") or len(stripped) < 2 or stripped[1].isspace():
        return None
    head, *tail = stripped[1:].split(None, 1)
    rest = tail[0] if tail else ""
    name, _, mention = head.partition("@")
    if mention and (bot_name is None or mention.lower() != bot_name.lower()):
        return None
    spec = _BY_NAME.get(name.lower())
    if spec is None:
        return None
    return Command(spec.name, rest.strip())


def help_text() -> str:
    lines = ["Commands:"]
    lines += [f"/{spec.name} — {spec.summary}" for spec in CONTROL_COMMANDS]
    return "\n".join(lines)
