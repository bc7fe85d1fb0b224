"""The offline default agent: replies ``echo: <text>`` and streams it in chunks.

A turn input starting with ``!sh `` is a tool request instead: every line that starts
with ``!sh `` becomes one shell call, in order, so tests and demos can drive tool calls
and approvals without a model. ``!delegate <task>`` is one ``delegate`` call, and each
``!attach <path>`` line (``!attach <path> | <caption>``) one ``attach_file`` call.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from chatgate.agents.base import (
    AgentEvent,
    AgentRequest,
    Final,
    TextDelta,
    ToolCall,
    ToolFinished,
    ToolStarted,
    TurnMessage,
    call_tool,
)

SHELL_PREFIX = "!sh "
DELEGATE_PREFIX = "!delegate "
ATTACH_PREFIX = "!attach "
TOOLS_DISABLED = "tools are not enabled for this agent"


def shell_commands(model_input: str) -> list[str] | None:
    """The commands of a ``!sh`` turn in order, or None when it is not one.

    A line starting with ``!sh `` starts a command; a line that does not continues the
    previous one, so a multi-line script after one ``!sh`` is a single command.
    """
    text = model_input.strip()
    if not text.startswith(SHELL_PREFIX):
        return None
    commands: list[str] = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(SHELL_PREFIX):
            commands.append(stripped[len(SHELL_PREFIX) :].strip())
        else:
            commands[-1] += "\n" + line
    return commands


def _said(message: TurnMessage) -> str:
    """The message's text, and what it carried: ``received photo.png (image/png, 1.2 kB)``."""
    lines = [message.text] if message.text or not (message.media or message.media_notes) else []
    lines += [f"received {item.label()}" for item in message.media]
    lines += list(message.media_notes)
    return "\n".join(lines)


class EchoAgent:
    """Deterministic, offline, and streamed like a real model so previews show."""

    name = "echo"

    def __init__(self, chunk_delay_ms: float = 30.0, chunk_chars: int = 6) -> None:
        if chunk_chars < 1:
            raise ValueError("chunk_chars must be >= 1")
        self._delay = max(chunk_delay_ms, 0.0) / 1000.0
        self._chunk = chunk_chars

    async def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]:
        if request.model_input.strip().startswith(DELEGATE_PREFIX):
            async for event in self._delegate(request, request.model_input.strip()[len(DELEGATE_PREFIX) :]):
                yield event
            return
        if request.model_input.strip().startswith(ATTACH_PREFIX):
            async for event in self._attach(request, request.model_input.strip()):
                yield event
            return
        commands = shell_commands(request.model_input)
        if commands is not None:
            async for event in self._run_commands(request, commands):
                yield event
            return
        text = "echo: " + "\n".join(_said(m) for m in request.messages)
        for start in range(0, len(text), self._chunk):
            if self._delay:
                await asyncio.sleep(self._delay)
            yield TextDelta(text[start : start + self._chunk])
        yield Final(text)

    async def _run_commands(self, request: AgentRequest, commands: list[str]) -> AsyncIterator[AgentEvent]:
        # The reply is not streamed in chunks: tool output can be long, and the preview
        # during the turn belongs to the approval prompts.
        if request.tools is None:
            yield Final(TOOLS_DISABLED)
            return
        contents: list[str] = []
        for n, command in enumerate(commands, start=1):
            call = ToolCall(call_id=f"echo-{n}", name="shell", arguments={"command": command})
            yield ToolStarted(call)
            result = await call_tool(request.tools, call)
            yield ToolFinished(result)
            contents.append(result.content)
        if len(contents) == 1:
            yield Final(contents[0])
            return
        # Several results: label each with its command so a reader can tell them apart.
        yield Final("\n\n".join(f"$ {c}\n{r}" for c, r in zip(commands, contents, strict=True)))

    async def _delegate(self, request: AgentRequest, task: str) -> AsyncIterator[AgentEvent]:
        """``!delegate <task>``: one ``delegate`` tool call, answered with the tool's result."""
        if request.tools is None:
            yield Final(TOOLS_DISABLED)
            return
        call = ToolCall(call_id="echo-delegate", name="delegate", arguments={"task": task.strip()})
        yield ToolStarted(call)
        result = await call_tool(request.tools, call)
        yield ToolFinished(result)
        yield Final(result.content)

    async def _attach(self, request: AgentRequest, text: str) -> AsyncIterator[AgentEvent]:
        """``!attach <path> | <caption>`` lines: one ``attach_file`` call each, answered with the results."""
        if request.tools is None:
            yield Final(TOOLS_DISABLED)
            return
        results: list[str] = []
        lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(ATTACH_PREFIX)]
        for n, line in enumerate(lines):
            path, _, caption = line[len(ATTACH_PREFIX) :].partition("|")
            arguments = {"path": path.strip()} | ({"caption": caption.strip()} if caption.strip() else {})
            call = ToolCall(call_id=f"echo-attach-{n}", name="attach_file", arguments=arguments)
            yield ToolStarted(call)
            result = await call_tool(request.tools, call)
            yield ToolFinished(result)
            results.append(result.content)
        yield Final("\n".join(results))

    async def aclose(self) -> None:
        return None
