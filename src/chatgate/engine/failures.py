"""What a chat user is told when a turn gets no answer, and the id that ties it to the log.

The user reads a short, honest reason and an error id; the operator greps the id and finds
the one log line with the details (hosts, ports, status codes), which users never see.
The outcome names the kind of failure so the API can answer with the matching HTTP status.
"""

from __future__ import annotations

import secrets

from chatgate.agents.base import FailureKind

OUTCOMES: dict[FailureKind, str] = {
    "timeout": "model_timeout",
    "unavailable": "model_unavailable",
    "failed": "agent_error",
}
"""A failed turn's outcome by kind: the API answers 504, 503 and 502 for them."""

_REASONS: dict[FailureKind, str] = {
    "timeout": "the model did not answer in time",
    "unavailable": "the model is not reachable right now",
    "failed": "the model answered with an error",
}


def new_error_id() -> str:
    """Short enough to read out, unique enough to grep: ``err-`` and 10 hex digits."""
    return f"err-{secrets.token_hex(5)}"


def apology(kind: FailureKind, error_id: str) -> str:
    again = " Please try again in a moment." if kind != "failed" else ""
    return f"Sorry, I could not answer: {_REASONS[kind]} (error id {error_id}).{again}"


def turn_timeout_apology(seconds: float, error_id: str) -> str:
    return f"Sorry, I did not finish within {seconds:.0f} seconds (error id {error_id})."
