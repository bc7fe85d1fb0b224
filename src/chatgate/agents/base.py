"""The Agent protocol: a turn in, an async stream of events out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class TurnMessage:
    """One user message of this turn, with its per-turn facts."""

    text: str
    sender: str | None = None
    message_ref: str | None = None
    received_at: float = 0.0


@dataclass(frozen=True, slots=True)
class AgentRequest:
    system: str
    history: tuple[HistoryEntry, ...]
    messages: tuple[TurnMessage, ...]
    model_input: str
    """The turn input as the model should read it (senders named when shared)."""

    session_key: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class Final:
    text: str


@dataclass(frozen=True, slots=True)
class AgentError:
    message: str
    retryable: bool = False


AgentEvent = TextDelta | Final | AgentError


class Agent(Protocol):
    """Streams one turn. Must end with exactly one ``Final`` or ``AgentError``."""

    name: str

    def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]: ...

    async def aclose(self) -> None: ...
