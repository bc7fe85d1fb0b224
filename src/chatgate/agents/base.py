"""The Agent protocol: a turn in, an async stream of events out.

Tools are offered to an agent through a ``ToolRunner``. The agent decides *what* to
call; the runner decides *whether* and *how* it runs (the engine wraps it with human
approvals), so an agent never executes anything itself.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal, Protocol

import msgspec

from chatgate.domain.history import HistoryEntry
from chatgate.domain.media import MediaContent, MediaItem
from chatgate.domain.usage import Usage

log = logging.getLogger(__name__)

ToolStatus = Literal["ok", "error", "denied"]
FailureKind = Literal["timeout", "unavailable", "failed"]
"""Why a turn got no answer, as a client can act on it: the model did not answer in time
(504), could not be reached or is overloaded (503), or answered with an error (502)."""


class TurnMessage(msgspec.Struct, frozen=True):
    """One user message of this turn, with its per-turn facts."""

    text: str
    sender: str | None = None
    message_ref: str | None = None
    received_at: float = 0.0
    media: tuple[MediaItem, ...] = ()
    """The files the message carried, fetched and checked (their content is in ``AgentRequest.media``)."""
    media_notes: tuple[str, ...] = ()
    """One line per file of the message that did not come through, saying why."""


class ToolCall(msgspec.Struct, frozen=True):
    """One call the agent wants made. ``call_id`` pairs it with its result."""

    call_id: str
    name: str
    arguments: dict[str, Any]


class ToolResult(msgspec.Struct, frozen=True):
    """What the model reads back: exit code and output, or why the call did not run."""

    call_id: str
    content: str
    status: ToolStatus = "ok"


class ToolRunner(Protocol):
    """Runs the tools of one turn; may wait (for a human) before running a call."""

    def specs(self) -> tuple[dict[str, Any], ...]:
        """OpenAI-style tool schemas (``{"type": "function", "function": {...}}``)."""
        ...

    async def call(self, call: ToolCall) -> ToolResult:
        """Never raises for a tool's failure: a failure is a result the model can read."""
        ...


async def call_tool(tools: ToolRunner, call: ToolCall) -> ToolResult:
    """``tools.call`` for agents: a runner that breaks its promise and raises still gives
    the model a result (and leaves a log line), so a turn ends with a reply, not a crash.
    Cancellation propagates."""
    try:
        return await tools.call(call)
    except Exception as exc:
        log.exception("tool runner raised for %s (%s)", call.name, call.call_id)
        return ToolResult(call.call_id, f"the tool failed: {type(exc).__name__}: {exc}", "error")


class AgentRequest(msgspec.Struct, frozen=True):
    system: str
    history: tuple[HistoryEntry, ...]
    messages: tuple[TurnMessage, ...]
    model_input: str
    """The turn input as the model should read it (senders named when shared)."""

    session_key: str
    tools: ToolRunner | None = None
    """The tools this turn may call; None means the agent gets none."""
    profile: str | None = None
    """The model profile this turn runs on (``domain/profiles.py``); None: the default."""
    media: Mapping[str, MediaContent] = msgspec.field(default_factory=dict)
    """What the model may read of each file of this turn's messages and of the history, by sha."""

    def texts(self) -> tuple[str, ...]:
        """Everything the model reads, for a token estimate when it reports no usage."""
        return (self.system, *(entry.content for entry in self.history), self.model_input)

    @property
    def turn_media(self) -> tuple[MediaItem, ...]:
        """This turn's files, in message order."""
        return tuple(item for message in self.messages for item in message.media)


class TextDelta(msgspec.Struct, frozen=True):
    text: str


class ToolStarted(msgspec.Struct, frozen=True):
    """The agent handed ``call`` to the runner (which may now wait for approval)."""

    call: ToolCall


class ToolFinished(msgspec.Struct, frozen=True):
    """The runner answered the call with the same ``call_id``."""

    result: ToolResult


class Final(msgspec.Struct, frozen=True):
    text: str
    usage: Usage | None = None
    """The model's own token count for the turn (all its calls); None when it gave none."""


class ImageMade(msgspec.Struct, frozen=True):
    """An image the model returned with its answer (decoded, not yet checked): the engine checks and
    stores it like an uploaded file and sends it after the reply, as ``attach_file`` would."""

    data: bytes


class AgentFailed(msgspec.Struct, frozen=True):
    """The turn's last event when the agent could not answer (the model endpoint failed...).

    ``message`` is for the operator's log only: it may name hosts, ports and exception text,
    which no chat user or API client is shown (they get a short reason and an error id)."""

    message: str
    retryable: bool = False
    """Whether the same turn sent again later may succeed (the gateway does not resend it)."""
    kind: FailureKind = "failed"


AgentEvent = TextDelta | ToolStarted | ToolFinished | ImageMade | Final | AgentFailed


class Agent(Protocol):
    """Streams one turn. Must end with exactly one ``Final`` or ``AgentFailed``."""

    name: str

    def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]: ...

    async def aclose(self) -> None: ...
