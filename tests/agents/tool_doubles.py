"""A ToolRunner test double for tests whose subject is the agent, not the runner."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from chatgate.agents.base import ToolCall, ToolResult, ToolRunner, ToolStatus
from chatgate.agents.tools import SHELL_TOOL_SCHEMA

Respond = Callable[[ToolCall], Awaitable[ToolResult]]


class RecordingRunner:
    """Records every call in order and answers with ``respond`` (or a fixed ok result)."""

    def __init__(self, respond: Respond | None = None) -> None:
        self.calls: list[ToolCall] = []
        self._respond = respond

    @classmethod
    def around(cls, runner: ToolRunner) -> RecordingRunner:
        """Record the calls and let a real runner answer them."""
        return cls(runner.call)

    @classmethod
    def answering(cls, content: str, status: ToolStatus = "ok") -> RecordingRunner:
        async def respond(call: ToolCall) -> ToolResult:
            return ToolResult(call.call_id, content, status)

        return cls(respond)

    def specs(self) -> tuple[dict[str, Any], ...]:
        return (SHELL_TOOL_SCHEMA,)

    async def call(self, call: ToolCall) -> ToolResult:
        self.calls.append(call)
        if self._respond is None:
            return ToolResult(call.call_id, f"ran {call.name}")
        return await self._respond(call)
