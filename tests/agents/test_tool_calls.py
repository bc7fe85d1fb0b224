"""The OpenAI agent's tool loop, against the fake server over real HTTP."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from fake_openai_server import API_KEY, CallTools, Fail, FakeOpenAIServer, Reply, ScriptedCall, split_text
from tool_doubles import RecordingRunner

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
    TurnMessage,
)
from chatgate.agents.openai_agent import OpenAIAgent
from chatgate.agents.tools import SHELL_TOOL_SCHEMA
from chatgate.agents.tools.runner import ShellToolRunner
from chatgate.domain.usage import Usage

AgentFactory = Callable[..., OpenAIAgent]  # the ``make_agent`` fixture (conftest.py)

ECHO_HI = ScriptedCall("shell", json.dumps({"command": "echo hi"}), call_id="call_abc", pieces=4)


def request_with(tools: ToolRunner | None, text: str = "say hi with the shell") -> AgentRequest:
    return AgentRequest(
        system="You may use tools.",
        history=(),
        messages=(TurnMessage(text=text),),
        model_input=text,
        session_key="test:tools",
        tools=tools,
    )


async def collect(agent: OpenAIAgent, request: AgentRequest) -> list[AgentEvent]:
    return [event async for event in agent.stream(request)]


async def lingering_tasks(before: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    """Tasks started since ``before`` that are still running after a bounded chance to end.

    An async generator a library leaves open (the openai SDK's SSE reader did, after
    ``[DONE]``) is closed by a short task asyncio starts when the garbage collector finds it.
    Such a task is not ours and ends by itself, so the property is: nothing stays behind.
    """
    gc.collect()
    extra = asyncio.all_tasks() - before
    if extra:
        await asyncio.wait(extra, timeout=5.0)
    return asyncio.all_tasks() - before


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


async def test_streamed_call_runs_once_and_its_result_goes_back_to_the_model(
    server: FakeOpenAIServer, make_agent: AgentFactory, tmp_path: Path
) -> None:
    assert len(split_text(ECHO_HI.arguments, ECHO_HI.pieces)) == 4  # really streamed in pieces
    server.script(CallTools((ECHO_HI,)), Reply("The shell said hi.", chunks=3))
    runner = RecordingRunner.around(ShellToolRunner(tmp_path, timeout_s=30, output_cap=4096))

    events = await collect(make_agent(), request_with(runner))

    call = ToolCall("call_abc", "shell", {"command": "echo hi"})
    assert runner.calls == [call]
    assert events[0] == ToolStarted(call)
    finished = events[1]
    assert isinstance(finished, ToolFinished)
    assert finished.result.call_id == "call_abc"
    assert finished.result.status == "ok"
    assert "exit code 0" in finished.result.content
    assert "hi" in finished.result.content
    assert events[2:] == [
        *(TextDelta(p) for p in split_text("The shell said hi.", 3)),
        Final("The shell said hi."),
    ]

    first, second = (r.body for r in server.requests)
    assert first["tools"] == [SHELL_TOOL_SCHEMA]
    assert second["tools"] == [SHELL_TOOL_SCHEMA]
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert second["messages"][len(first["messages"]) :] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "shell", "arguments": '{"command": "echo hi"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": finished.result.content},
    ]


async def test_text_before_a_call_streams_and_the_final_keeps_both_steps(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(CallTools((ECHO_HI,), text="Let me look.", text_chunks=2), Reply("Done."))
    runner = RecordingRunner.answering("exit code 0\nstdout:\nhi\nstderr: (empty)")

    events = await collect(make_agent(), request_with(runner))

    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts == [*split_text("Let me look.", 2), "\n\n", "Done."]
    assert events[-1] == Final("Let me look.\n\nDone.")
    # The model's own words before the call are part of its assistant message.
    assistant = server.requests[1].body["messages"][-2]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == "Let me look."


async def test_several_calls_in_one_step_run_in_order_with_a_result_each(
    server: FakeOpenAIServer, make_agent: AgentFactory, tmp_path: Path
) -> None:
    first = ScriptedCall("shell", json.dumps({"command": "echo one > order.txt"}), call_id="c1")
    second = ScriptedCall("shell", json.dumps({"command": "echo two >> order.txt; cat order.txt"}), "c2")
    server.script(CallTools((first, second)), Reply("ok"))
    runner = RecordingRunner.around(ShellToolRunner(tmp_path, timeout_s=30, output_cap=4096))

    events = await collect(make_agent(), request_with(runner))

    assert [c.call_id for c in runner.calls] == ["c1", "c2"]
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["ToolStarted", "ToolFinished", "ToolStarted", "ToolFinished", "TextDelta", "Final"]
    results = tool_messages(server.requests[1].body)
    assert [m["tool_call_id"] for m in results] == ["c1", "c2"]
    assert "one\ntwo" in results[1]["content"]  # the second ran after the first


async def test_step_cap_ends_with_a_final_that_says_so_and_keeps_the_text(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(CallTools((ECHO_HI,), text="Trying."))  # the model never stops calling
    runner = RecordingRunner.answering("exit code 0")

    events = await collect(make_agent(max_tool_steps=3), request_with(runner))

    assert len(server.requests) == 3
    # The third step's call is not run: no model call is left to read its result.
    assert len(runner.calls) == 2
    final = events[-1]
    assert isinstance(final, Final)
    assert final.text.startswith("Trying.\n\nTrying.\n\nTrying.\n\n[stopped:")
    assert "3 steps" in final.text
    assert sum(isinstance(e, Final | AgentFailed) for e in events) == 1


async def test_a_cap_of_one_step_runs_no_tools(server: FakeOpenAIServer, make_agent: AgentFactory) -> None:
    server.script(CallTools((ECHO_HI,)))
    runner = RecordingRunner()

    events = await collect(make_agent(max_tool_steps=1), request_with(runner))

    assert runner.calls == []
    assert len(events) == 1
    assert isinstance(events[0], Final)
    assert "stopped" in events[0].text


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [('{"command": "echo hi"', "not valid JSON"), ('["echo hi"]', "must be a JSON object")],
)
async def test_unusable_arguments_are_not_run_and_the_model_reads_why(
    server: FakeOpenAIServer, make_agent: AgentFactory, arguments: str, reason: str
) -> None:
    broken = ScriptedCall("shell", arguments, call_id="bad1")
    server.script(CallTools((broken,)), Reply("Sorry, let me fix that."))
    runner = RecordingRunner()

    events = await collect(make_agent(), request_with(runner))

    assert runner.calls == []
    assert not any(isinstance(e, ToolStarted | ToolFinished) for e in events)
    assert events[-1] == Final("Sorry, let me fix that.")
    sent = server.requests[1].body["messages"]
    assert sent[-2]["tool_calls"][0]["function"]["arguments"] == arguments  # echoed back as written
    (result,) = tool_messages(server.requests[1].body)
    assert result["tool_call_id"] == "bad1"
    assert result["content"].startswith("not run:")
    assert reason in result["content"]


async def test_a_denied_result_reaches_the_model_verbatim(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    denial = "denied by Ada: not run (rm -rf touches files outside the workspace)"
    server.script(CallTools((ECHO_HI,)), Reply("Understood, I will not run it."))
    runner = RecordingRunner.answering(denial, status="denied")

    events = await collect(make_agent(), request_with(runner))

    assert ToolFinished(ToolResult("call_abc", denial, "denied")) in events
    assert tool_messages(server.requests[1].body) == [
        {"role": "tool", "tool_call_id": "call_abc", "content": denial}
    ]
    assert events[-1] == Final("Understood, I will not run it.")


async def test_a_runner_that_raises_becomes_an_error_result_not_a_crash(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    async def explode(call: ToolCall) -> ToolResult:
        raise RuntimeError("approval store is down")

    server.script(CallTools((ECHO_HI,)), Reply("The tool broke."))

    events = await collect(make_agent(), request_with(RecordingRunner(explode)))

    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [f.result.status for f in finished] == ["error"]
    assert "approval store is down" in finished[0].result.content
    assert "approval store is down" in tool_messages(server.requests[1].body)[0]["content"]
    assert events[-1] == Final("The tool broke.")


async def test_calls_without_index_or_id_are_assembled_and_answered_under_one_id(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    lax = ScriptedCall("shell", json.dumps({"command": "echo hi"}), call_id=None, pieces=3)
    server.script(CallTools((lax,), with_index=False), Reply("ok"))
    runner = RecordingRunner()

    await collect(make_agent(), request_with(runner))

    (call,) = runner.calls
    assert call.arguments == {"command": "echo hi"}
    sent = server.requests[1].body["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == call.call_id
    assert sent[-1]["tool_call_id"] == call.call_id


async def test_model_failure_after_a_tool_step_ends_with_one_agent_error(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(CallTools((ECHO_HI,)), Fail(500, "backend fell over"))
    runner = RecordingRunner()

    events = await collect(make_agent(), request_with(runner))

    assert len(runner.calls) == 1
    assert isinstance(events[-1], AgentFailed)
    assert "backend fell over" in events[-1].message
    assert not any(isinstance(e, Final) for e in events)


async def test_without_tools_nothing_is_offered_and_a_stray_call_runs_nothing(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(CallTools((ECHO_HI,), text="I would call a tool."))

    events = await collect(make_agent(), request_with(None))

    assert "tools" not in server.requests[0].body
    assert len(server.requests) == 1
    assert events == [TextDelta("I would call a tool."), Final("I would call a tool.")]


async def test_cancelling_while_a_call_waits_for_approval_cancels_the_wait_and_leaves_no_task(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(CallTools((ECHO_HI,)), Reply("never reached"))
    waiting = asyncio.Event()
    outcome: list[str] = []

    async def wait_for_a_human(call: ToolCall) -> ToolResult:
        waiting.set()
        try:
            await asyncio.Event().wait()  # nobody ever answers
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        return ToolResult(call.call_id, "approved")

    agent = make_agent()
    tasks_before = asyncio.all_tasks()

    async def consume() -> None:
        async for _ in agent.stream(request_with(RecordingRunner(wait_for_a_human))):
            pass

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(waiting.wait(), 5.0)
    consumer.cancel()

    with pytest.raises(asyncio.CancelledError):
        await consumer
    assert outcome == ["cancelled"]
    assert await lingering_tasks(tasks_before) == set()
    assert len(server.requests) == 1  # the model was not asked again


def test_max_tool_steps_must_allow_one_model_call() -> None:
    with pytest.raises(ValueError, match="max_tool_steps"):
        OpenAIAgent(base_url="http://127.0.0.1:1/v1", model="m", api_key="k", max_tool_steps=0)


async def test_a_consumer_that_leaves_at_tool_started_never_gets_the_call_run(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(CallTools((ECHO_HI,)), Reply("never reached"))
    runner = RecordingRunner()
    stream = make_agent().stream(request_with(runner))
    assert isinstance(stream, AsyncGenerator)
    try:
        first = await anext(stream)
    finally:
        await stream.aclose()

    assert first == ToolStarted(ToolCall("call_abc", "shell", {"command": "echo hi"}))
    assert runner.calls == []
    assert len(server.requests) == 1


async def test_index_less_calls_with_their_own_ids_stay_separate(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    one = ScriptedCall("shell", json.dumps({"command": "echo 1"}), call_id="a")
    two = ScriptedCall("shell", json.dumps({"command": "echo 2"}), call_id="b")
    server.script(CallTools((one, two), with_index=False), Reply("ok"))
    runner = RecordingRunner()

    await collect(make_agent(), request_with(runner))

    assert runner.calls == [
        ToolCall("a", "shell", {"command": "echo 1"}),
        ToolCall("b", "shell", {"command": "echo 2"}),
    ]


async def test_fake_server_answers_tool_calls_without_streaming_too(server: FakeOpenAIServer) -> None:
    server.script(CallTools((ECHO_HI,)))
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key=API_KEY) as client:
        completion = await client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}]
        )

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    (call,) = choice.message.tool_calls
    assert call.id == "call_abc"
    assert call.type == "function"
    assert (call.function.name, call.function.arguments) == ("shell", ECHO_HI.arguments)


async def test_a_tool_loop_adds_up_the_usage_of_its_model_calls(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    """Each model call reports its own usage (``include_usage``); the turn's is their sum."""
    server.script(CallTools((ECHO_HI,), usage=(100, 10)), Reply("Done.", usage=(130, 3)))
    events = await collect(make_agent(), request_with(RecordingRunner.answering("exit code 0")))
    assert events[-1] == Final("Done.", Usage(230, 13))
    assert all(r.body["stream_options"] == {"include_usage": True} for r in server.requests)


async def test_a_tool_loop_with_a_call_that_reported_no_usage_reports_none(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    """A partial count would pass for the whole: none, and the engine estimates (marked)."""
    server.script(CallTools((ECHO_HI,)), Reply("Done.", usage=(130, 3)))
    events = await collect(make_agent(), request_with(RecordingRunner.answering("exit code 0")))
    assert events[-1] == Final("Done.", None)
