"""The control commands' behaviour: one table entry per command, carrying its handler.

The names, aliases and summaries are domain data (``domain/commands.py``, also what
Telegram's command menu and the relay's Discord manifest show); what each command
does at admission is here. Admission answers every entry inline, never queued.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import msgspec

from chatgate.domain.commands import CONTROL_COMMANDS, CommandSpec, help_text
from chatgate.domain.inbound import Inbound
from chatgate.domain.store_roles import Transcript

Reply = Callable[[str, Transcript], Awaitable[str]]
"""(session key, transcript) → the reply text; ``{cancelled}`` is filled in by the store."""

CommandHandler = Callable[[Inbound, str, str], Awaitable[str]]
"""(the command's event, its session key, its arguments) → the reply text: a command whose
feature is built after admission (schedules, background tasks). It may write (idempotently, by
the event's delivery id: a redelivered command reaches it again) before the command commits."""


class ControlCommand(msgspec.Struct, frozen=True):
    spec: CommandSpec
    reply: Reply
    stops: bool = False
    """Cancels the session's waiting messages and stops its running turn."""
    resets: bool = False
    """Starts a new conversation (the history the agent sees begins again)."""
    answers_approval: bool = False
    """Handled by the approval desk when approvals are on (``/approve``, ``/deny``)."""


def _fixed(text: str) -> Reply:
    async def reply(session_key: str, transcript: Transcript) -> str:
        return text

    return reply


async def _status(session_key: str, transcript: Transcript) -> str:
    info = await transcript.session_info(session_key)
    if info is None:
        return f"Session {session_key}: no messages yet."
    state = "running a reply" if info.leased_by else "idle"
    lines = [f"Session {session_key}", f"State: {state}", f"Waiting messages: {info.waiting}"]
    if info.last_error:
        lines.append(f"Last error: {info.last_error}")
    return "\n".join(lines)


_NO_SCHEDULES = "Schedules are not enabled on this gateway (schedules.enabled: false)."
_NO_TASKS = "Background tasks are not enabled on this gateway (background.enabled: false)."
_NO_APPROVALS = "No approval is waiting in this chat (tools that need approval are not enabled here)."
_BEHAVIOUR: dict[str, tuple[Reply, bool, bool, bool]] = {
    # name: (reply, stops, resets, answers_approval)
    "help": (_fixed(help_text()), False, False, False),
    "new": (_fixed("Started a new conversation. Dropped {cancelled} waiting message(s)."), True, True, False),
    "stop": (_fixed("Stopped. Dropped {cancelled} waiting message(s)."), True, False, False),
    "status": (_status, False, False, False),
    "model": (_fixed("This gateway has one model profile (agent.profiles adds more)."), False, False, False),
    "approve": (_fixed(_NO_APPROVALS), False, False, True),
    "deny": (_fixed(_NO_APPROVALS), False, False, True),
    "remind": (_fixed(_NO_SCHEDULES), False, False, False),
    "every": (_fixed(_NO_SCHEDULES), False, False, False),
    "schedules": (_fixed(_NO_SCHEDULES), False, False, False),
    "bg": (_fixed(_NO_TASKS), False, False, False),
    "tasks": (_fixed(_NO_TASKS), False, False, False),
    "cancel": (_fixed(_NO_TASKS), False, False, False),
}

COMMAND_TABLE: Mapping[str, ControlCommand] = {
    spec.name: ControlCommand(spec, *_BEHAVIOUR[spec.name]) for spec in CONTROL_COMMANDS
}
"""Every control command by name; building it fails at import if a command has no behaviour."""
