"""The ``delegate`` tool over a real store: one task per piece of work in a turn's item, even when a
resumed turn asks again with new call ids; the bound on running tasks; the combined runner."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chatgate.agents.base import ToolCall, ToolResult
from chatgate.domain.source import Source
from chatgate.engine.approvals import ToolContext
from chatgate.engine.tasks import BackgroundTasks, CombinedTools, DelegateTool, TaskSettings
from support.engine_harness import PLATFORM

if TYPE_CHECKING:
    from support.engine_harness import MakeHarness

CTX = ToolContext("k-parent", "sid-1", 7, Source(PLATFORM, "c1", user_id="u1"), "ref-1", {})


def desk(h: Any, **settings: Any) -> BackgroundTasks:
    async def stop(key: str) -> None:
        return None

    return BackgroundTasks(h.store, h.scheduler.on_queued, stop, TaskSettings(delegation=True, **settings))


async def test_a_resumed_turn_delegating_the_same_work_finds_its_task(make_harness: MakeHarness) -> None:
    h = await make_harness(start=False)
    tasks = desk(h)
    first = await DelegateTool(tasks, CTX).call(ToolCall("call-a", "delegate", {"task": "sum it"}))
    resumed = await DelegateTool(tasks, CTX).call(ToolCall("call-b", "delegate", {"task": "sum it"}))
    assert first.status == resumed.status == "ok" and first.content == resumed.content
    tool = DelegateTool(tasks, CTX)
    await tool.call(ToolCall("c1", "delegate", {"task": "sum it"}))
    second = await tool.call(ToolCall("c2", "delegate", {"task": "sum it"}))  # asked twice in one turn
    assert second.content != first.content
    assert len(await h.store.list_tasks("k-parent")) == 2
    (task, _) = await h.store.list_tasks("k-parent")
    assert (task.kind, task.origin, task.parent_key) == ("delegate", CTX.source, "k-parent")


async def test_bad_arguments_and_the_running_bound_are_results_not_exceptions(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness(start=False)
    tool = DelegateTool(desk(h, max_running_per_session=1), CTX)
    assert (await tool.call(ToolCall("c0", "delegate", {"task": 3}))).status == "error"
    assert (await tool.call(ToolCall("c1", "delegate", {"task": "one"}))).status == "ok"
    refused = await tool.call(ToolCall("c2", "delegate", {"task": "two"}))
    assert refused.status == "error" and "running here already" in refused.content


async def test_combined_tools_route_each_call_by_name() -> None:
    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

        def specs(self) -> tuple[dict[str, Any], ...]:
            return ({"type": "function", "function": {"name": self.name}},)

        async def call(self, call: ToolCall) -> ToolResult:
            return ToolResult(call.call_id, f"{self.name} ran")

    tools = CombinedTools([Named("shell"), Named("delegate")])
    assert [s["function"]["name"] for s in tools.specs()] == ["shell", "delegate"]
    assert (await tools.call(ToolCall("1", "delegate", {}))).content == "delegate ran"
    unknown = await tools.call(ToolCall("2", "nope", {}))
    assert unknown.status == "error" and "no tool 'nope'" in unknown.content
