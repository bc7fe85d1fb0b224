"""An agent backed by any OpenAI-compatible chat completions endpoint.

The request is one streamed POST on aiohttp (``model_http.py``, which says why
not the official SDK), and chunks stay plain dicts, read defensively
(``openai_chunks.py``): messages and chunks are JSON-shaped from end to end.

Failures never escape as exceptions: the engine needs every turn to end with
exactly one ``Final`` or ``AgentFailed``, and needs to know whether retrying
the turn could help. Only cancellation propagates, because it is the caller's
decision, not the model's failure.

With a ``ToolRunner`` in the request the agent runs the usual tool loop: the
model's streamed tool calls go through the runner one by one, in order, and
their results go back to the model, for at most ``max_tool_steps`` model calls.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal

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
from chatgate.agents.model_http import ModelEndpoint, ModelStatusError, ModelStream
from chatgate.agents.model_images import chunk_images, decoded
from chatgate.agents.openai_chunks import PendingCalls, StreamedCall, chunk_text, field_of
from chatgate.agents.openai_errors import describe, shorten
from chatgate.domain.usage import Usage

log = logging.getLogger(__name__)

_REDACTED = "[redacted]"
UsageRequest = Literal["auto", "always", "never"]
"""Whether a streamed call asks for the model's token counts (``stream_options.include_usage``)."""
_STEP_SEPARATOR = "\n\n"
Message = dict[str, Any]
"""One chat message as the endpoint reads it (``role``, ``content``, ...)."""


class OpenAIAgent:
    """Streams a turn from an OpenAI-compatible server."""

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
        stream_usage: UsageRequest = "auto",
        image_output: bool = False,
    ) -> None:
        if not api_key:
            # A missing key is a config mistake; local servers accept any placeholder.
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
        self._image_output = image_output
        """Ask for images too (``modalities``); images a server returns are taken either way."""
        self._stream_usage = stream_usage
        self._ask_usage = stream_usage != "never"
        """Cleared for good (``auto``) when the server refuses ``stream_options``: some do."""
        self._api_key = api_key
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._timeout_s = timeout_s
        self._max_tool_steps = max_tool_steps
        """Model calls per turn; each step after the first answers the previous one's tool calls."""
        self._endpoint = ModelEndpoint(base_url, api_key, timeout_s=timeout_s, max_retries=max_retries)

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
            for image in await asyncio.to_thread(decoded, outcome.images) if outcome.images else ():
                yield image
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
        messages: list[Message],
        specs: list[dict[str, Any]],
        so_far: list[str],
        outcome: _StepOutcome,
    ) -> AsyncGenerator[TextDelta, None]:
        """One model call: streams its text and records its tool calls or failure in ``outcome``."""
        try:
            chunks = await self._open_stream(messages, specs)
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
                outcome.usage = Usage.of(field_of(chunk, "usage")) or outcome.usage
                outcome.images += chunk_images(chunk)
                text = chunk_text(chunk)
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

    async def _open_stream(self, messages: list[Message], specs: list[dict[str, Any]]) -> ModelStream:
        try:
            return await self._post(messages, specs)
        except ModelStatusError as exc:
            if not (self._stream_usage == "auto" and self._ask_usage and _names_stream_options(exc)):
                raise
        # A server that rejects the parameter (strict proxies, older local servers) would fail
        # every turn: ask once more without it, and never again on this profile.
        self._ask_usage = False
        log.warning(
            "model endpoint refused stream_options; asking without it from now on (token counts"
            " will be estimated; set stream_usage: never on this profile to skip the first try)",
            extra={"model": self._model},
        )
        return await self._post(messages, specs)

    async def _post(self, messages: list[Message], specs: list[dict[str, Any]]) -> ModelStream:
        return await self._endpoint.stream("/chat/completions", self._body(messages, specs))

    def _body(self, messages: list[Message], specs: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._model, "messages": messages, "stream": True}
        if self._ask_usage:
            # The model's own count comes in a last chunk only when asked for (OpenAI's streaming rule).
            body["stream_options"] = {"include_usage": True}
        if self._temperature is not None:
            body["temperature"] = self._temperature
        if self._max_tokens is not None:
            body["max_tokens"] = self._max_tokens
        if specs:
            body["tools"] = specs
        if self._image_output:
            body["modalities"] = ["image", "text"]
        return body

    async def aclose(self) -> None:
        await self._endpoint.aclose()

    def _to_agent_error(self, exc: Exception) -> AgentFailed:
        failure = describe(exc, self._timeout_s)
        # Redact before shortening so a truncated key can never slip through.
        message = shorten(self._redact(failure.reason))
        return AgentFailed(message=message, retryable=failure.retryable, kind=failure.kind)

    def _redact(self, text: str) -> str:
        # Servers sometimes echo credentials back in error bodies.
        return text.replace(self._api_key, _REDACTED)


def _names_stream_options(exc: ModelStatusError) -> bool:
    """Whether a 400 is about ``stream_options`` (its ``param``, or its message names it)."""
    if exc.status != 400:
        return False
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body)
    param = error.get("param") if isinstance(error, dict) else None
    return param == "stream_options" or "stream_options" in str(exc.body)


def _build_messages(request: AgentRequest, vision: bool = False) -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": request.system}]
    for entry in request.history:
        if entry.role == "assistant":
            messages.append({"role": "assistant", "content": entry.content})
        else:
            content = user_content(entry.content, entry.media, request.media, vision)
            messages.append({"role": "user", "content": content})
    content = user_content(request.model_input, request.turn_media, request.media, vision)
    messages.append({"role": "user", "content": content})
    return messages


@dataclass
class _StepOutcome:
    """What one model call produced besides its streamed deltas."""

    text: str = ""
    pending: PendingCalls = field(default_factory=PendingCalls)
    failure: AgentFailed | None = None
    usage: Usage | None = None
    """The step's ``usage`` chunk (``stream_options.include_usage``), if the server sent one."""
    images: list[str] = field(default_factory=list)
    """The image URLs the step's chunks carried (``model_images.py``)."""


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
    tools: ToolRunner, calls: list[StreamedCall], messages: list[Message]
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
        messages.append({"role": "tool", "tool_call_id": call.call_id, "content": result.content})


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


def _assistant_message(text: str, calls: list[StreamedCall]) -> Message:
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ],
    }
