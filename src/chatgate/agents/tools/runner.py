"""A ToolRunner for the shell tool, without approvals.

Validation (``shell_command``) and execution (``ShellToolRunner.execute``) are separate so
the engine can wrap this runner with approvals: it validates and inspects the command,
asks a human, and only then executes it, reusing both halves.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chatgate.agents.base import ToolCall, ToolResult
from chatgate.agents.tools.env import check_names
from chatgate.agents.tools.sandbox import BwrapSandbox
from chatgate.agents.tools.shell import SHELL_TOOL_SCHEMA, ShellResult, run_shell
from chatgate.domain.errors import AgentError

log = logging.getLogger(__name__)

SHELL_TOOL_NAME = "shell"


class ToolArgumentError(AgentError, ValueError):
    """A call the runner will not run as asked; the message is written for the model."""


def shell_command(call: ToolCall) -> str:
    """The command a shell call asks for, or ``ToolArgumentError`` saying what is wrong."""
    if call.name != SHELL_TOOL_NAME:
        raise ToolArgumentError(f"unknown tool {call.name!r}; the only tool is {SHELL_TOOL_NAME!r}")
    extra = sorted(k for k in call.arguments if k != "command")
    if extra:
        names = ", ".join(repr(k) for k in extra)
        raise ToolArgumentError(f"unexpected argument(s) {names}; the shell tool takes only 'command'")
    if "command" not in call.arguments:
        raise ToolArgumentError("missing argument 'command' (the command line to run, a string)")
    command = call.arguments["command"]
    if not isinstance(command, str):
        raise ToolArgumentError(f"argument 'command' must be a string, not {_json_type(command)}")
    if not command.strip():
        raise ToolArgumentError("argument 'command' is empty")
    if "\x00" in command:
        raise ToolArgumentError("argument 'command' contains a NUL character")
    return command


def checked_command(call: ToolCall) -> str | ToolResult:
    """The command of a valid shell call, or the error result to give the model (logged)."""
    try:
        return shell_command(call)
    except ToolArgumentError as exc:
        log.warning("refused a tool call: %s", exc, extra={"tool": call.name, "call_id": call.call_id})
        return ToolResult(call.call_id, f"not run: {exc}", "error")


def format_shell_result(result: ShellResult, *, timeout_s: float | None = None) -> str:
    """The text the model reads: status line, stdout and stderr sections, truncation note.

    Deterministic for the same output (no durations), so replies and tests are stable.
    ``timeout_s`` names the limit a timed-out command hit.
    """
    if result.timed_out:
        limit = f"{timeout_s:g}" if timeout_s is not None else f"{result.duration:.1f}"
        status = f"killed after the {limit} s timeout (with its child processes)"
    elif result.exit_code is not None and result.exit_code < 0:
        status = f"killed by {_signal_name(-result.exit_code)} (exit code {result.exit_code})"
    else:
        status = f"exit code {result.exit_code}"
    lines = [status]
    for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        lines.append(f"{name}:\n{text.removesuffix(chr(10))}" if text else f"{name}: (empty)")
    if result.truncated:
        lines.append(
            f"[output truncated: the command wrote {result.stdout_bytes} bytes to stdout and "
            f"{result.stderr_bytes} bytes to stderr; only the beginning of a longer stream is shown]"
        )
    return "\n".join(lines)


class ShellToolRunner:
    """Runs every valid shell call at once, in ``workdir``; the engine adds approvals."""

    def __init__(
        self,
        workdir: Path,
        timeout_s: float,
        output_cap: int,
        sandbox: BwrapSandbox | None = None,
        env: Sequence[str] = (),
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        if output_cap < 0:
            raise ValueError("output_cap must be >= 0")
        self.workdir = workdir
        self.timeout_s = timeout_s
        self.output_cap = output_cap
        self.sandbox = sandbox
        """When set, every command runs inside it (``tools.sandbox: bwrap``)."""
        self.env = tuple(check_names(env))
        """Variables of the gateway's environment a command sees (``tools.env``); every command
        gets a minimal environment besides (``agents/tools/env.py``)."""

    def specs(self) -> tuple[dict[str, Any], ...]:
        return (SHELL_TOOL_SCHEMA,)

    async def call(self, call: ToolCall) -> ToolResult:
        command = checked_command(call)
        if isinstance(command, ToolResult):
            return command
        return await self.execute(command, call.call_id)

    async def execute(self, command: str, call_id: str) -> ToolResult:
        """Run an already validated (and, if needed, approved) command.

        Status "ok" means it ran and exited, whatever its exit code; "error" means it
        could not start or was killed by the timeout. Cancellation kills it and propagates.
        """
        try:
            result = await run_shell(
                command,
                workdir=self.workdir,
                timeout=self.timeout_s,
                output_cap=self.output_cap,
                keep=self.env,
                sandbox=self.sandbox,
            )
        except (OSError, ValueError) as exc:  # missing workdir, no /bin/sh or bwrap, NUL in the command
            log.warning("could not start a shell command: %s", exc, extra={"call_id": call_id})
            return ToolResult(call_id, f"not run: could not start the command ({exc})", "error")
        content = format_shell_result(result, timeout_s=self.timeout_s)
        return ToolResult(call_id, content, "error" if result.timed_out else "ok")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _json_type(value: object) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", list: "an array", dict: "an object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
