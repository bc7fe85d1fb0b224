"""The echo agent's ``!sh`` lines: tool calls without a model, for tests and demos."""

from __future__ import annotations

from pathlib import Path

from tool_doubles import RecordingRunner

from chatgate.agents.base import (
    AgentEvent,
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
from chatgate.agents.echo import TOOLS_DISABLED, EchoAgent, shell_commands
from chatgate.agents.tools.runner import ShellToolRunner


def request_with(text: str, tools: ToolRunner | None) -> AgentRequest:
    return AgentRequest(
        system="",
        history=(),
        messages=(TurnMessage(text=text),),
        model_input=text,
        session_key="test:echo",
        tools=tools,
    )


async def collect(text: str, tools: ToolRunner | None) -> list[AgentEvent]:
    agent = EchoAgent(chunk_delay_ms=0)
    return [event async for event in agent.stream(request_with(text, tools))]


def shell_runner(workdir: Path) -> ShellToolRunner:
    return ShellToolRunner(workdir, timeout_s=30, output_cap=4096)


async def test_sh_runs_the_command_and_replies_with_its_result(tmp_path: Path) -> None:
    events = await collect("!sh echo hi", shell_runner(tmp_path))

    call = ToolCall("echo-1", "shell", {"command": "echo hi"})
    assert events[0] == ToolStarted(call)
    assert events[1] == ToolFinished(ToolResult("echo-1", "exit code 0\nstdout:\nhi\nstderr: (empty)"))
    assert events[2:] == [Final("exit code 0\nstdout:\nhi\nstderr: (empty)")]


async def test_the_reply_is_deterministic(tmp_path: Path) -> None:
    first = await collect("!sh echo same; echo oops >&2", shell_runner(tmp_path))
    second = await collect("!sh echo same; echo oops >&2", shell_runner(tmp_path))

    assert first == second
    assert first[-1] == Final("exit code 0\nstdout:\nsame\nstderr:\noops")


async def test_two_sh_lines_are_two_calls_in_order_with_both_results(tmp_path: Path) -> None:
    text = "!sh echo first > order.txt\n!sh echo second >> order.txt; cat order.txt"

    events = await collect(text, shell_runner(tmp_path))

    started = [e.call for e in events if isinstance(e, ToolStarted)]
    assert [c.call_id for c in started] == ["echo-1", "echo-2"]
    final = events[-1]
    assert isinstance(final, Final)
    # Each result is labelled with its command; the second saw the first's file.
    assert final.text == (
        "$ echo first > order.txt\nexit code 0\nstdout: (empty)\nstderr: (empty)\n\n"
        "$ echo second >> order.txt; cat order.txt\nexit code 0\nstdout:\nfirst\nsecond\nstderr: (empty)"
    )


async def test_the_agent_hands_the_runner_exactly_these_calls() -> None:
    runner = RecordingRunner()
    text = "  !sh ls -la\n!sh  rm -rf build  \n!sh git status  "

    events = await collect(text, runner)

    assert runner.calls == [
        ToolCall("echo-1", "shell", {"command": "ls -la"}),
        ToolCall("echo-2", "shell", {"command": "rm -rf build"}),
        ToolCall("echo-3", "shell", {"command": "git status"}),
    ]
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["ToolStarted", "ToolFinished"] * 3 + ["Final"]


async def test_lines_after_an_sh_line_continue_its_command(tmp_path: Path) -> None:
    runner = RecordingRunner.around(shell_runner(tmp_path))

    events = await collect("!sh for i in 1 2; do\n  echo $i\ndone", runner)

    assert runner.calls == [ToolCall("echo-1", "shell", {"command": "for i in 1 2; do\n  echo $i\ndone"})]
    assert events[-1] == Final("exit code 0\nstdout:\n1\n2\nstderr: (empty)")


async def test_a_denied_call_is_reported_and_the_next_call_still_runs() -> None:
    async def deny_rm(call: ToolCall) -> ToolResult:
        if "rm" in call.arguments["command"]:
            return ToolResult(call.call_id, "denied by Ada: not run", "denied")
        return ToolResult(call.call_id, "exit code 0")

    runner = RecordingRunner(deny_rm)

    events = await collect("!sh rm -rf /tmp/x\n!sh echo ok", runner)

    finished = [e.result for e in events if isinstance(e, ToolFinished)]
    assert [r.status for r in finished] == ["denied", "ok"]
    assert events[-1] == Final("$ rm -rf /tmp/x\ndenied by Ada: not run\n\n$ echo ok\nexit code 0")


async def test_without_tools_the_agent_says_so_and_calls_nothing() -> None:
    assert await collect("!sh echo hi", None) == [Final(TOOLS_DISABLED)]
    assert TOOLS_DISABLED == "tools are not enabled for this agent"


async def test_other_text_is_still_echoed_even_with_tools() -> None:
    runner = RecordingRunner()

    events = await collect("what does !sh do?", runner)

    assert runner.calls == []
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "echo: what does !sh do?"
    assert events[-1] == Final("echo: what does !sh do?")


def test_shell_commands_parsing() -> None:
    assert shell_commands("hello") is None
    assert shell_commands("!shell ls") is None
    assert shell_commands("!sh") is None  # no command after the prefix
    assert shell_commands("\n !sh ls \n") == ["ls"]
    assert shell_commands("!sh a\n!sh b") == ["a", "b"]
    assert shell_commands("!sh cat <<EOF\nx\nEOF") == ["cat <<EOF\nx\nEOF"]
