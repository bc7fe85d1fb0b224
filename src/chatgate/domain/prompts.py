"""Approval prompts as plain values, and every text a prompt and its outcome show.

Pure: the engine builds a ``Prompt`` from a durable approval record and hands it to an
adapter; the adapter renders it (buttons, or the plain text with ``/approve`` and
``/deny``). The outcome text is always computed from the *recorded* outcome, so what a
chat shows never differs from what the store says happened.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import msgspec

from chatgate.domain.shell.danger import DangerRule, Tier

PromptOutcome = Literal["approved", "denied", "expired"]
ExpiryReason = Literal["timeout", "restart", "stopped"]

PROMPT_ID_RE = re.compile(r"[A-Za-z0-9_.-]{1,48}")
"""Prompt ids are ``<per-process nonce>.<8 hex>``; this is what any lane may carry back."""
TOKEN_PREFIX = "hp1"
MAX_TOKEN_BYTES = 64
OPTION_IDS: tuple[Tier, ...] = ("once", "session", "always", "deny")
OPTION_LABELS: dict[str, str] = {
    "once": "Approve once",
    "session": "Approve for this session",
    "always": "Always approve",
    "deny": "Deny",
}
_COMMAND_SHOWN = 1500
"""Longest command shown in a prompt; the rest is named as hidden, never silently cut."""


class PromptOption(msgspec.Struct, frozen=True):
    id: str
    label: str


class Prompt(msgspec.Struct, frozen=True):
    """What an adapter shows: text plus one option per offered answer.

    ``message_id`` is the platform message showing it, once sent (for editing it when
    it is resolved); ``None`` before, or where the platform has no such id.
    """

    prompt_id: str
    text: str
    options: tuple[PromptOption, ...]
    message_id: str | None = None

    def token(self, option_id: str) -> str:
        return prompt_token(self.prompt_id, option_id)


class PromptResolution(msgspec.Struct, frozen=True):
    """How a prompt ended, as recorded: ``outcome`` plus the text to show for it."""

    outcome: PromptOutcome
    text: str
    tier: str | None = None


def options_for(tiers: Sequence[str]) -> tuple[PromptOption, ...]:
    return tuple(PromptOption(t, OPTION_LABELS[t]) for t in OPTION_IDS if t in tiers)


def prompt_token(prompt_id: str, option_id: str) -> str:
    """``hp1:<prompt_id>:<option_id>``: what a button carries (at most 64 bytes)."""
    token = f"{TOKEN_PREFIX}:{prompt_id}:{option_id}"
    if len(token.encode()) > MAX_TOKEN_BYTES:
        raise ValueError(f"prompt token {token!r} is longer than {MAX_TOKEN_BYTES} bytes")
    return token


def parse_prompt_token(token: str) -> tuple[str, str] | None:
    """``(prompt_id, option_id)`` of a button token, or None when it is not one of ours."""
    parts = token.split(":")
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
        return None
    if not PROMPT_ID_RE.fullmatch(parts[1]) or parts[2] not in OPTION_IDS:
        return None
    return parts[1], parts[2]


def duration(seconds: float) -> str:
    """``300`` -> ``5 min``, ``90`` -> ``90 s``: timeouts as a person reads them."""
    if seconds >= 120 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def shown_command(command: str) -> str:
    if len(command) <= _COMMAND_SHOWN:
        return command
    hidden = len(command) - _COMMAND_SHOWN
    return f"{command[:_COMMAND_SHOWN]}\n[… {hidden} more characters not shown; deny if unsure]"


_ASKS = {
    "shell": "run this shell command",
    "attach_file": "send you a file; reading it is asked as this shell command would be",
}
"""What each tool's approval asks for; any other tool is an MCP tool's call (``mcp_tools.py``)."""


def wanted(tool: str) -> str:
    """What the agent wants to do, by the approval record's ``tool``."""
    return _ASKS.get(tool, "call this MCP tool")


def prompt_text(
    command: str,
    rules: Sequence[DangerRule],
    timeout_s: float,
    tiers: Sequence[str],
    *,
    buttons: bool,
    tool: str = "shell",
) -> str:
    """The prompt: the command (or MCP call), why it needs a human, the answers and the deadline."""
    reasons = "\n".join(f"- {rule.description} [{rule.key}]" for rule in rules)
    lines = [
        f"Approval needed: the agent wants to {wanted(tool)}:",
        shown_command(command),
        "It needs a human because it:",
        reasons,
    ]
    wait = f"Without an answer within {duration(timeout_s)} it is not run."
    if buttons:
        lines.append(f"Answer with a button below (or {command_hints(tiers)}). {wait}")
    else:
        lines.append(f"Answer with {command_hints(tiers)}. {wait}")
    return "\n".join(lines)


def command_hints(tiers: Sequence[str]) -> str:
    hints = ["/approve (once)"]
    if "session" in tiers:
        hints.append("/approve session")
    if "always" in tiers:
        hints.append("/approve always")
    return ", ".join(hints) + " or /deny"


def outcome_text(
    state: str, tier: str | None, by_name: str | None, reason: str | None, timeout_s: float | None = None
) -> str:
    """The recorded outcome in words. Pending has no outcome text (it is still open)."""
    who = by_name or "someone"
    if state == "approved":
        how = {"session": "for this session", "always": "always"}.get(tier or "", "once")
        return f"Approved ({how}) by {who}."
    if state == "denied":
        return f"Denied by {who} — not run."
    if state == "expired":
        if reason == "restart":
            return "Expired by a gateway restart — not run."
        if reason == "stopped":
            return "Expired — not run (the reply was stopped)."
        within = f" within {duration(timeout_s)}" if timeout_s else ""
        return f"Expired — not run (no answer{within})."
    return "Still waiting for an answer."


def late_text(state: str, recorded: str) -> str:
    """What an answer that lost (the prompt was no longer open) is told: the recorded outcome."""
    if state == "expired":
        return recorded
    return f"Already answered: {recorded}"
