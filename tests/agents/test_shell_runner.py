"""ShellToolRunner: argument validation, real execution, and the text the model reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chatgate.agents.base import ToolCall, ToolResult
from chatgate.agents.tools import SHELL_TOOL_SCHEMA, ShellResult
from chatgate.agents.tools.runner import (
    ShellToolRunner,
    ToolArgumentError,
    format_shell_result,
    shell_command,
)


def shell_call(arguments: dict[str, Any], name: str = "shell") -> ToolCall:
    return ToolCall("c1", name, arguments)


def runner_in(workdir: Path, timeout_s: float = 30.0, output_cap: int = 4096) -> ShellToolRunner:
    return ShellToolRunner(workdir, timeout_s=timeout_s, output_cap=output_cap)


def test_specs_offer_the_shell_tool(tmp_path: Path) -> None:
    assert runner_in(tmp_path).specs() == (SHELL_TOOL_SCHEMA,)


async def test_a_valid_call_runs_in_the_workdir_and_reports_exit_code_and_streams(tmp_path: Path) -> None:
    result = await runner_in(tmp_path).call(shell_call({"command": "echo made > f.txt; cat f.txt; exit 3"}))

    assert result == ToolResult("c1", "exit code 3\nstdout:\nmade\nstderr: (empty)", "ok")
    assert (tmp_path / "f.txt").read_text() == "made\n"


@pytest.mark.parametrize(
    ("name", "arguments", "reason"),
    [
        ("python", {"command": "touch ran"}, "unknown tool 'python'"),
        ("shell", {}, "missing argument 'command'"),
        ("shell", {"command": 42}, "'command' must be a string, not a number"),
        ("shell", {"command": ["echo", "hi"]}, "'command' must be a string, not an array"),
        ("shell", {"command": None}, "'command' must be a string, not null"),
        ("shell", {"command": "   "}, "'command' is empty"),
        ("shell", {"command": "touch ran", "cwd": "/"}, "unexpected argument(s) 'cwd'"),
        ("shell", {"command": "touch ran\x00"}, "NUL"),
    ],
)
async def test_invalid_calls_are_not_run_and_say_why(
    tmp_path: Path, name: str, arguments: dict[str, Any], reason: str
) -> None:
    """Where a case has a runnable command, it would create ``ran``."""
    result = await runner_in(tmp_path).call(shell_call(arguments, name))

    assert result.status == "error"
    assert result.call_id == "c1"
    assert result.content.startswith("not run: ")
    assert reason in result.content
    assert not (tmp_path / "ran").exists()
    with pytest.raises(ToolArgumentError):
        shell_command(shell_call(arguments, name))


async def test_execute_runs_an_already_validated_command_under_the_given_id(tmp_path: Path) -> None:
    result = await runner_in(tmp_path).execute("echo approved", "call-7")

    assert result == ToolResult("call-7", "exit code 0\nstdout:\napproved\nstderr: (empty)", "ok")


async def test_a_command_past_the_timeout_is_killed_and_reported_as_an_error(tmp_path: Path) -> None:
    result = await runner_in(tmp_path, timeout_s=0.5).execute("echo started; sleep 30", "c1")

    assert result.status == "error"
    assert result.content.startswith("killed after the 0.5 s timeout")
    assert "started" in result.content


async def test_long_output_is_truncated_with_a_note(tmp_path: Path) -> None:
    result = await runner_in(tmp_path, output_cap=10).execute("printf '%0100d' 0", "c1")

    assert result.status == "ok"
    assert "stdout:\n0000000000\n" in result.content
    assert "[output truncated: the command wrote 100 bytes to stdout and 0 bytes to stderr" in result.content


async def test_a_missing_workdir_is_an_error_result_not_an_exception(tmp_path: Path) -> None:
    result = await runner_in(tmp_path / "gone").execute("echo hi", "c1")

    assert result.status == "error"
    assert result.content.startswith("not run: could not start the command")


def test_format_names_a_signal_that_killed_the_command() -> None:
    result = ShellResult(exit_code=-9, stdout="", stderr="", timed_out=False, truncated=False, duration=0.1)

    assert format_shell_result(result) == "killed by SIGKILL (exit code -9)\nstdout: (empty)\nstderr: (empty)"


def test_constructor_rejects_nonsense_limits(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        ShellToolRunner(tmp_path, timeout_s=0, output_cap=1)
    with pytest.raises(ValueError, match="output_cap"):
        ShellToolRunner(tmp_path, timeout_s=1, output_cap=-1)


async def test_the_shell_runs_without_the_variables_the_approval_check_assumes_unset(tmp_path: Path) -> None:
    """The proof resolves ``cd sub`` to ./sub and reads words with the default IFS."""
    from chatgate.agents.tools.shell import run_shell

    env = {"PATH": "/usr/bin:/bin", "CDPATH": "/", "ENV": "/x", "BASH_ENV": "/x", "IFS": "m", "KEEP": "k"}
    env["BASH_FUNC_ls%%"] = "() { echo hijacked; }"
    result = await run_shell(
        'echo "${CDPATH-unset} ${ENV-unset} ${BASH_ENV-unset} ${KEEP-unset}"; env | grep -c BASH_FUNC_',
        workdir=tmp_path,
        env=env,
        keep=("KEEP",),
    )
    assert result.stdout.splitlines() == ["unset unset unset k", "0"]
