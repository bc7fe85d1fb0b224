"""An agent backed by any OpenAI-compatible chat completions endpoint.

The request goes through the official SDK's low-level ``post`` on its aiohttp
transport, and chunks stay plain dicts: the SDK's typed ``create`` (parameter
transform, httpx, a model per chunk) cost 6.5 ms of CPU per streamed reply,
this path 2.9 ms (``bench/openai_client.py``), with the SDK's retries, timeouts
and error types kept.

Failures never escape as exceptions: the engine needs every turn to end with
exactly one ``Final`` or ``AgentFailed``, and needs to know whether retrying
the turn could help. Only cancellation propagates, because it is the caller's
decision, not the model's failure.

With a ``ToolRunner`` in the request the agent runs the usual tool loop: the
model's streamed tool calls go through the runner one by one, in order, and
their results go back to the model, for at most ``max_tool_steps`` model calls.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from openai import AsyncOpenAI, AsyncStream, DefaultAioHttpClient
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)

from chatgate.agents.base import (
    AgentEvent,
    AgentFailed,
    AgentRequest,
    Final,
    TextDelta,
    ToolCall,
    ToolFinished,
    ToolResult,
    ToolRunner,
    ToolStarted,
    call_tool,
)
from chatgate.agents.media_parts import user_content
from chatgate.agents.openai_errors import describe, shorten
from chatgate.domain.usage import Usage

log = logging.getLogger(__name__)

_REDACTED = "[redacted]"
_STEP_SEPARATOR = "\n\n"


class OpenAIAgent:
    """Streams a turn from an OpenAI-compatible server through the official SDK."""

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 2,
        max_tool_steps: int = 8,
        vision: bool = False,
    ) -> None:
        if not api_key:
            # The SDK refuses an empty key; local servers accept any placeholder.
            raise ValueError("api_key must be non-empty (use any placeholder for local servers)")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if max_tool_steps < 1:
            raise ValueError("max_tool_steps must be >= 1")
        self._model = model
        self._vision = vision
        """The model reads images (its profile's ``vision``): ``image_url`` parts, else a note."""
        self._api_key = api_key
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._timeout_s = timeout_s
        self._max_tool_steps = max_tool_steps
        """Model calls per turn; each step after the first answers the previous one's tool calls."""
        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key=api_key,
            timeout=timeout_s,
            max_retries=max_retries,
            http_client=DefaultAioHttpClient(timeout=timeout_s),
        )

    async def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]:
        tools = request.tools
        specs = list(tools.specs()) if tools is not None else []
        messages = _build_messages(request, self._vision)
        so_far: list[str] = []  # every delta yielded, in all steps; the Final is their concatenation
        usage = _Tally()
        for step in range(1, self._max_tool_steps + 1):
            outcome = _StepOutcome()
            # ``aclosing``: if the consumer stops here, the step's HTTP stream closes now, not at GC.
            async with aclosing(self._model_step(messages, specs, so_far, outcome)) as deltas:
                async for delta in deltas:
                    yield delta
            if outcome.failure is not None:
                yield outcome.failure
                return
            usage.add(outcome.usage)
            calls = outcome.pending.calls(step)
            if tools is None or not calls:
                yield Final("".join(so_far), usage.total)
                return
            if step == self._max_tool_steps:
                break  # this step's calls are not run: no model call is left to read their results
            messages.append(_assistant_message(outcome.text, calls))
            async with aclosing(_run_calls(tools, calls, messages)) as events:
                async for event in events:
                    yield event

        note = (
            f"[stopped: the model still wanted to call tools after {self._max_tool_steps} steps, "
            "the most one turn allows]"
        )
        text = "".join(so_far)
        yield Final(f"{text}\n\n{note}" if text else note, usage.total)

    async def _model_step(
        self,
        messages: list[ChatCompletionMessageParam],
        specs: list[dict[str, Any]],
        so_far: list[str],
        outcome: _StepOutcome,
    ) -> AsyncGenerator[TextDelta, None]:
        """One model call: streams its text and records its tool calls or failure in ``outcome``."""
        try:
            chunks = await self._client.post(
                "/chat/completions",
                body=self._body(messages, specs),
                cast_to=object,
                stream=True,
                stream_cls=AsyncStream[object],
            )
        except Exception as exc:  # CancelledError is a BaseException and propagates.
            outcome.failure = self._to_agent_error(exc)
            return
        try:
            while True:
                # Errors are caught around the read only, never around ``yield``,
                # so nothing the consumer throws in is mistaken for a model error.
                try:
                    chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    outcome.failure = self._to_agent_error(exc)
                    break
                if specs:
                    outcome.pending.feed(chunk)
                outcome.usage = Usage.of(_field(chunk, "usage")) or outcome.usage
                text = _chunk_text(chunk)
                if not text:
                    continue
                if not outcome.text and so_far:
                    # A later step's text starts a new paragraph, in the preview too.
                    so_far.append(_STEP_SEPARATOR)
                    yield TextDelta(_STEP_SEPARATOR)
                outcome.text += text
                so_far.append(text)
                yield TextDelta(text)
        finally:
            # Runs on normal end, on error, on cancellation and on early aclose():
            # the HTTP response must not outlive the turn.
            await chunks.close()

    def _body(
        self, messages: list[ChatCompletionMessageParam], specs: list[dict[str, Any]]
    ) -> dict[str, Any]:
        # Already JSON-shaped: the typed ``create`` would only walk it again to transform nothing.
        body: dict[str, Any] = {"model": self._model, "messages": messages, "stream": True}
        # The model's own count comes in a last chunk only when asked for (OpenAI's streaming rule).
        body["stream_options"] = {"include_usage": True}
        if self._temperature is not None:
            body["temperature"] = self._temperature
        if self._max_tokens is not None:
            body["max_tokens"] = self._max_tokens
        if specs:
            body["tools"] = specs
        return body

    async def aclose(self) -> None:
        await self._client.close()

    def _to_agent_error(self, exc: Exception) -> AgentFailed:
        failure = describe(exc, self._timeout_s)
        # Redact before shortening so a truncated key can never slip through.
        message = shorten(self._redact(failure.reason))
        return AgentFailed(message=message, retryable=failure.retryable, kind=failure.kind)

    def _redact(self, text: str) -> str:
        # Servers sometimes echo credentials back in error bodies.
        return text.replace(self._api_key, _REDACTED)


def _build_messages(request: AgentRequest, vision: bool = False) -> list[ChatCompletionMessageParam]:
    messages: list[ChatCompletionMessageParam] = [
        ChatCompletionSystemMessageParam(role="system", content=request.system)
    ]
    for entry in request.history:
        if entry.role == "assistant":
            messages.append(ChatCompletionAssistantMessageParam(role="assistant", content=entry.content))
        else:
            content = user_content(entry.content, entry.media, request.media, vision)
            messages.append(ChatCompletionUserMessageParam(role="user", content=content))  # type: ignore[typeddict-item]
    content = user_content(request.model_input, request.turn_media, request.media, vision)
    messages.append(ChatCompletionUserMessageParam(role="user", content=content))  # type: ignore[typeddict-item]
    return messages


@dataclass
class _CallDraft:
    """A tool call as it streams in: arguments arrive as JSON fragments."""

    call_id: str | None = None
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class _StreamedCall:
    call_id: str
    name: str
    arguments: str
    """The raw JSON text, sent back to the model exactly as it wrote it."""


class _PendingCalls:
    """Assembles streamed ``tool_calls`` deltas by their index."""

    def __init__(self) -> None:
        self._drafts: dict[int, _CallDraft] = {}
        self._last: int | None = None

    def feed(self, chunk: object) -> None:
        # Chunks are the server's JSON, unvalidated: read every field defensively.
        for choice in _items(_field(chunk, "choices")):
            for delta in _items(_field(_field(choice, "delta"), "tool_calls")):
                call_id = _field(delta, "id")
                draft = self._draft_for(_field(delta, "index"), call_id)
                if isinstance(call_id, str) and call_id and draft.call_id is None:
                    draft.call_id = call_id
                function = _field(delta, "function")
                name = _field(function, "name")
                if isinstance(name, str) and name and not draft.name:
                    draft.name = name
                fragment = _field(function, "arguments")
                if isinstance(fragment, str):
                    draft.arguments += fragment

    def _draft_for(self, index: object, call_id: object) -> _CallDraft:
        if not isinstance(index, int):
            index = self._guess_index(call_id)
        self._last = index
        return self._drafts.setdefault(index, _CallDraft())

    def _guess_index(self, call_id: object) -> int:
        # A server that omits the index: a new id starts a new call, anything else continues.
        last = self._drafts.get(self._last) if self._last is not None else None
        if self._last is None or last is None:
            return 0
        if isinstance(call_id, str) and call_id and call_id != last.call_id:
            return max(self._drafts) + 1
        return self._last

    def calls(self, step: int) -> list[_StreamedCall]:
        """The complete calls in index order; a call without an id gets one, stable within the turn."""
        return [
            _StreamedCall(draft.call_id or f"call-{step}-{index}", draft.name, draft.arguments)
            for index, draft in sorted(self._drafts.items())
        ]


@dataclass
class _StepOutcome:
    """What one model call produced besides its streamed deltas."""

    text: str = ""
    pending: _PendingCalls = field(default_factory=_PendingCalls)
    failure: AgentFailed | None = None
    usage: Usage | None = None
    """The step's ``usage`` chunk (``stream_options.include_usage``), if the server sent one."""


class _Tally:
    """A turn's usage over its model calls; None unless every call reported its own."""

    def __init__(self) -> None:
        self.total: Usage | None = None
        self._missing = False

    def add(self, step: Usage | None) -> None:
        if step is None:
            self._missing, self.total = True, None
        elif not self._missing:
            self.total = step if self.total is None else self.total + step


async def _run_calls(
    tools: ToolRunner, calls: list[_StreamedCall], messages: list[ChatCompletionMessageParam]
) -> AsyncGenerator[AgentEvent, None]:
    """Runs the calls in order and appends each result as a ``tool`` message."""
    for call in calls:
        try:
            arguments = _decode_arguments(call.arguments)
        except ValueError as exc:
            # Bad input from the model: it is not run, and the model reads why.
            log.warning("model sent unusable tool arguments: %s", exc, extra={"tool": call.name})
            result = ToolResult(call.call_id, f"not run: {exc}", "error")
        else:
            tool_call = ToolCall(call.call_id, call.name, arguments)
            yield ToolStarted(tool_call)
            result = await call_tool(tools, tool_call)
            yield ToolFinished(result)
        messages.append(
            ChatCompletionToolMessageParam(role="tool", tool_call_id=call.call_id, content=result.content)
        )


def _decode_arguments(raw: str) -> dict[str, Any]:
    """The arguments object, or ``ValueError`` with a reason the model can act on."""
    if not raw.strip():
        return {}  # some servers send nothing for a call without parameters
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the arguments are not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(value, dict):
        raise ValueError("the arguments must be a JSON object")
    return value


def _assistant_message(text: str, calls: list[_StreamedCall]) -> ChatCompletionAssistantMessageParam:
    return ChatCompletionAssistantMessageParam(
        role="assistant",
        content=text or None,
        tool_calls=[
            ChatCompletionMessageFunctionToolCallParam(
                id=call.call_id,
                type="function",
                function={"name": call.name, "arguments": call.arguments},
            )
            for call in calls
        ],
    )


def _chunk_text(chunk: object) -> str:
    # Some servers send chunks with no choices (e.g. a trailing usage chunk),
    # and lax ones omit fields: tolerate both.
    texts = (_field(_field(c, "delta"), "content") for c in _items(_field(chunk, "choices")))
    return "".join(t for t in texts if isinstance(t, str))


def _field(value: object, name: str) -> object:
    return value.get(name) if isinstance(value, dict) else None


def _items(value: object) -> list[object]:
    return value if isinstance(value, list) else []
