"""Tool progress: a running tool shows as one status line in the reply's preview, edited in place,
never as messages of its own; the final replaces it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from chatgate.agents.base import (
    AgentEvent,
    AgentRequest,
    Final,
    TextDelta,
    ToolCall,
    ToolFinished,
    ToolResult,
    ToolStarted,
)
from chatgate.engine.tool_progress import finished_line, started_line, with_status

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from support.engine_harness import MakeHarness

    Wait = Callable[..., Awaitable[Any]]


class SlowToolAgent:
    """Says a word, runs one long 'tool' (held by a gate), then answers."""

    name = "slow-tool"

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]:
        yield TextDelta("Let me check.")
        call = ToolCall("c1", "shell", {"command": "make test\nand more"})
        yield ToolStarted(call)
        await self.gate.wait()
        yield ToolFinished(ToolResult("c1", "exit code 0", "ok"))
        yield Final("All green.")

    async def aclose(self) -> None:
        return None


def test_status_lines() -> None:
    call = ToolCall("c", "shell", {"command": "x" * 100})
    assert started_line(call) == "⚙ shell: " + "x" * 59 + "… …"
    assert started_line(ToolCall("c", "delegate", {})) == "⚙ delegate …"
    assert finished_line(call, ToolResult("c", "", "denied")) == "⚙ shell: declined"
    assert finished_line(None, ToolResult("c", "", "error")) == "⚙ tool: failed"
    assert with_status("", "⚙ s") == "⚙ s" and with_status("hi", "⚙ s") == "hi\n\n⚙ s"


async def test_a_running_tool_is_one_status_line_in_the_preview_then_the_final(
    make_harness: MakeHarness, wait: Wait
) -> None:
    agent = SlowToolAgent()
    h = await make_harness(agent=agent)
    await h.send("run the tests", delivery_id="m1")
    running = "Let me check.\n\n⚙ shell: make test …"
    await wait(lambda: any(text == running for _, _, text in h.adapter.drafts), message="the status line")
    assert h.adapter.rows("c1") == [], "the status is a preview, not a message"
    agent.gate.set()
    assert await h.finals("c1", 1) == ["All green."]
    shown = [text for _, _, text in h.adapter.drafts]
    assert "Let me check.\n\n⚙ shell: done" in shown
    assert [r.kind for r in h.adapter.rows("c1")] == ["final"], "one message in the chat: the final"
