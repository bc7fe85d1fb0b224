"""Approval records: what a prompt asked, of whom, and how it ended (the durable side of a prompt).

``domain.prompts`` renders them; the store keeps them; the engine's broker and
admission resolve them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import msgspec
from msgspec.structs import replace

from chatgate.domain.prompts import Prompt, options_for

ApprovalState = Literal["pending", "approved", "denied", "expired"]
GrantScope = Literal["session", "always"]


class ApprovalRecord(msgspec.Struct, frozen=True):
    """One approval prompt: what was asked, of whom, and how it ended (durable).

    ``state`` starts ``pending`` and changes exactly once (``resolve_approval`` is a
    compare-and-set). ``tier`` is set when approved; ``reason`` when expired
    (``timeout``, ``restart``, ``stopped``). ``prompt_via`` says how it was shown:
    ``buttons`` (``prompt_message_id`` then names the platform message, when known) or
    ``text`` (an outbox notice with ``/approve`` and ``/deny``).
    """

    prompt_id: str
    session_key: str
    session_id: str
    inbox_seq: int
    call_id: str
    tool: str
    command: str
    rule_keys: tuple[str, ...]
    offered_tiers: tuple[str, ...]
    requester_id: str | None
    requester_name: str | None
    requested_at: float
    expires_at: float
    platform: str
    chat_id: str
    target: dict[str, Any]
    reply_to: str | None
    prompt_text: str
    prompt_via: Literal["buttons", "text"] = "text"
    state: ApprovalState = "pending"
    tier: str | None = None
    reason: str | None = None
    answered_by_id: str | None = None
    answered_by_name: str | None = None
    answered_at: float | None = None
    prompt_message_id: str | None = None

    def prompt(self) -> Prompt:
        return Prompt(
            self.prompt_id, self.prompt_text, options_for(self.offered_tiers), self.prompt_message_id
        )


class ApprovalResolution(msgspec.Struct, frozen=True):
    """What ``resolve_approval`` found: the row as recorded after the call, and whether
    *this* call changed it. ``record`` is None when no such prompt exists."""

    record: ApprovalRecord | None
    won: bool


class ApprovalAnswer(msgspec.Struct, frozen=True):
    """An answer committed together with the event that carried it (see ``AdmitRequest``).

    ``render`` turns the recorded result into the reply text (pure: it runs inside the
    transaction, so the reply always states the outcome that was actually recorded).
    """

    prompt_id: str
    outcome: Literal["approved", "denied", "expired"]
    tier: str | None
    by_id: str | None
    by_name: str | None
    render: Callable[[ApprovalResolution], str] | None = None
    reason: str | None = None
    """For ``expired``: why (an answer reaching a prompt whose turn no longer waits closes it)."""
    waiting_here: bool = True
    """Whether the answering process has the prompt's turn waiting for it. When it has not,
    the store records the answer only if a turn on another process of the fleet still
    waits (its session is leased by a live peer): see ``recorded``."""

    def recorded(self, waiting_elsewhere: bool) -> ApprovalAnswer:
        """What to record: this answer while some process's turn waits for it; otherwise the
        prompt's end (its turn was stopped between the tap and now), never an approval."""
        if self.waiting_here or waiting_elsewhere:
            return self
        return replace(self, outcome="expired", tier=None, by_id=None, by_name=None, reason="stopped")
