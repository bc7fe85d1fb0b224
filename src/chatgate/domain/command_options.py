"""Typed options of the chat commands, for platforms whose commands carry them (Discord).

A platform with real slash-command options registers each command with the options named
here, and turns a submitted command back into the text admission parses: ``/remind
when:10m prompt:stretch`` becomes ``/remind 10m stretch``, and ``/ask prompt:hello`` becomes
the message ``hello`` (``/ask`` is not a control command: it is a prompt for the agent).
Values are checked here, so a bad one is refused with its reason before anything is stored.
"""

from __future__ import annotations

from typing import Any

import msgspec

from chatgate.domain.commands import CONTROL_COMMANDS
from chatgate.domain.schedules import ScheduleError, parse_duration

ASK = "ask"
ASK_SUMMARY = "ask the agent: the prompt is the message, answered here"
MAX_PROMPT_CHARS = 4000
MAX_WORD_CHARS = 100
CRON_FIELDS = 5


class OptionSpec(msgspec.Struct, frozen=True):
    name: str
    description: str
    required: bool = True
    choices: tuple[str, ...] = ()
    max_length: int = MAX_WORD_CHARS


_PROMPT = OptionSpec("prompt", "what to ask the agent", max_length=MAX_PROMPT_CHARS)
COMMAND_OPTIONS: dict[str, tuple[OptionSpec, ...]] = {
    ASK: (_PROMPT,),
    "bg": (_PROMPT,),
    "remind": (OptionSpec("when", "how long from now: 30s, 10m, 1h30m, 2d"), _PROMPT),
    "every": (OptionSpec("schedule", "an interval (1h) or a cron line (0 9 * * 1-5)"), _PROMPT),
    "cancel": (OptionSpec("id", "the background task's id (see /tasks)"),),
    "model": (OptionSpec("name", "the model to switch to (leave out to list them)", required=False),),
    "approve": (
        OptionSpec("scope", "remember it: once, session or always", False, ("once", "session", "always")),
    ),
    "schedules": (
        OptionSpec("action", "pause, resume or delete a schedule", False, ("pause", "resume", "delete")),
        OptionSpec("id", "the schedule's id (with an action)", required=False),
    ),
}


def slash_commands() -> list[tuple[str, str, tuple[OptionSpec, ...]]]:
    """Every command a platform registers: ``(name, description, options)``, ``/ask`` first."""
    found = [(ASK, ASK_SUMMARY, COMMAND_OPTIONS[ASK])]
    found += [(c.name, c.summary, COMMAND_OPTIONS.get(c.name, ())) for c in CONTROL_COMMANDS]
    return found


def _check(command: str, spec: OptionSpec, value: str) -> str:
    text = value.strip()
    if spec.choices and text not in spec.choices:
        raise ValueError(f"/{command} {spec.name}: {value!r} is not one of {', '.join(spec.choices)}")
    if len(text) > spec.max_length:
        raise ValueError(f"/{command} {spec.name}: {len(text)} characters; the limit is {spec.max_length}")
    if spec.name == "prompt" and not text:
        raise ValueError(f"/{command} prompt: say what to ask; it is empty")
    if spec.name in ("when", "id") and len(text.split()) > 1:
        raise ValueError(f"/{command} {spec.name}: {value!r} must be one word")
    try:
        if spec.name == "when" or (spec.name == "schedule" and len(text.split()) != CRON_FIELDS):
            parse_duration(text)
    except ScheduleError as exc:
        raise ValueError(f"/{command} {spec.name}: {exc} (or, for /every, a five-field cron line)") from exc
    return text


def command_text(command: str, values: dict[str, Any]) -> str | None:
    """The text admission reads for ``command`` with these option values.

    ``None`` for a command not in the table (the caller keeps its own rendering); a
    ``ValueError`` with the reason for an unknown option, a missing or a bad value.
    """
    specs = COMMAND_OPTIONS.get(command)
    if specs is None:
        return None
    known = {s.name for s in specs}
    if extra := sorted(set(values) - known):
        raise ValueError(
            f"/{command} has no option {extra[0]!r} (it takes: {', '.join(sorted(known)) or 'none'})"
        )
    words: list[str] = []
    for spec in specs:
        raw = values.get(spec.name)
        if raw is None or raw == "":
            if spec.required:
                raise ValueError(f"/{command} needs {spec.name}: {spec.description}")
            continue
        if not isinstance(raw, str):
            raise ValueError(f"/{command} {spec.name} must be text, got {type(raw).__name__}")
        words.append(_check(command, spec, raw))
    if command == ASK:
        return words[0]
    return " ".join([f"/{command}", *words])
