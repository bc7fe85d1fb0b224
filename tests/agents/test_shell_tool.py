"""The shell tool runs real /bin/sh subprocesses without blocking the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

from chatgate.agents.tools import SHELL_TOOL_SCHEMA, run_shell
from chatgate.agents.tools.runner import format_shell_result

# Writes the pids of the shell, a child shell and a sleeping grandchild, then blocks.
FAMILY = (
    "echo started; echo $$ > shell.pid; "
    "sh -c 'echo $$ > child.pid; sleep 300 & echo $! > grandchild.pid; wait'; echo never"
)
PID_FILES = ("shell.pid", "child.pid", "grandchild.pid")


async def wait_until(condition: object, what: str, timeout: float = 30.0) -> None:
    assert callable(condition)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def family_processes(workdir: Path) -> list[psutil.Process]:
    """The live processes FAMILY started (psutil.Process pins pid + start time)."""
    pids: dict[str, int] = {}

    def all_written() -> bool:
        for name in PID_FILES:
            try:
                pids[name] = int((workdir / name).read_text().strip())
            except (FileNotFoundError, ValueError):
                return False
        return True

    await wait_until(all_written, "the pid files")
    return [psutil.Process(pids[name]) for name in PID_FILES]


def _pid_in(path: Path) -> bool:
    """``echo $! > path`` has finished: the file holds a whole line of digits."""
    text = path.read_text() if path.exists() else ""
    return text.endswith("\n") and text.strip().isdigit()


def gone(process: psutil.Process) -> bool:
    """Dead, or a zombie waiting for a reaper (PID 1 here may never reap orphans)."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_stdout_and_exit_code_are_reported(tmp_path: Path) -> None:
    result = await run_shell("echo hello; echo world; exit 3", workdir=tmp_path)
    assert result.exit_code == 3
    assert result.stdout == "hello\nworld\n"
    assert result.stderr == ""
    assert not result.timed_out
    assert not result.truncated
    assert result.duration >= 0


async def test_stderr_is_captured_separately_from_stdout(tmp_path: Path) -> None:
    result = await run_shell("echo out; echo oops >&2; ls /definitely/not/here", workdir=tmp_path)
    assert result.stdout == "out\n"
    assert result.stderr.startswith("oops\n")
    assert "/definitely/not/here" in result.stderr
    assert result.exit_code not in (0, None)


async def test_command_runs_in_the_working_directory(tmp_path: Path) -> None:
    result = await run_shell("pwd -P; echo made > made.txt", workdir=tmp_path)
    assert result.stdout == f"{await asyncio.to_thread(tmp_path.resolve)}\n"
    assert (tmp_path / "made.txt").read_text() == "made\n"


async def test_env_is_the_source_of_the_variables_a_command_may_keep(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GREETING": "hello", "OTHER": "x"}
    result = await run_shell(
        'echo "$GREETING"; echo "${OTHER-unset}"', workdir=tmp_path, env=env, keep=("GREETING",)
    )
    assert result.stdout == "hello\nunset\n"


async def test_stdin_is_empty_so_a_reader_does_not_hang(tmp_path: Path) -> None:
    result = await run_shell("cat; echo after", workdir=tmp_path, timeout=30)
    assert result.stdout == "after\n"
    assert not result.timed_out


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    task = asyncio.create_task(run_shell(FAMILY, workdir=tmp_path, timeout=2.0))
    processes = await family_processes(tmp_path)
    assert not any(gone(p) for p in processes)
    result = await task
    assert result.timed_out
    assert result.exit_code is None
    assert result.stdout == "started\n"  # output written before the kill is kept
    await wait_until(lambda: all(gone(p) for p in processes), "the shell, child and grandchild to die")
    rendered = format_shell_result(result, timeout_s=2.0)  # what the model reads
    assert "killed after the 2 s timeout" in rendered
    assert "started" in rendered


async def test_cancellation_kills_the_process_group_and_propagates(tmp_path: Path) -> None:
    task = asyncio.create_task(run_shell(FAMILY, workdir=tmp_path, timeout=600))
    processes = await family_processes(tmp_path)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_until(lambda: all(gone(p) for p in processes), "the shell, child and grandchild to die")


async def test_cancellation_while_the_shell_is_still_being_started_kills_its_whole_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a loaded machine the shell can fork its family before ``create_subprocess_exec`` has
    connected its pipes, so a cancellation lands inside asyncio's spawn. Hold the pipe wiring
    until the test has cancelled, to make that window certain."""
    loop = asyncio.get_running_loop()
    connect_read_pipe = loop.connect_read_pipe
    cancelled = asyncio.Event()

    async def after_the_cancellation(*args: Any, **kwargs: Any) -> Any:
        await cancelled.wait()
        return await connect_read_pipe(*args, **kwargs)

    monkeypatch.setattr(loop, "connect_read_pipe", after_the_cancellation)
    task = asyncio.create_task(run_shell(FAMILY, workdir=tmp_path, timeout=600))
    processes = await family_processes(tmp_path)
    try:
        task.cancel()
        cancelled.set()
        done, _ = await asyncio.wait({task}, timeout=30)
        assert done, "run_shell did not return after its cancellation"
        assert task.cancelled()
        await wait_until(lambda: all(gone(p) for p in processes), "the shell, child and grandchild to die")
    finally:
        for process in processes:  # a survivor would otherwise live on for 300 s
            with contextlib.suppress(psutil.Error):
                process.kill()


async def test_a_cancelled_call_leaves_reaping_the_shell_to_the_child_watcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Reaping the killed shell behind the child watcher's back makes asyncio warn "Unknown child
    process pid ..." (and ``chatgate status`` report it). The race is made certain: the shell has
    exited (a zombie) while its background child keeps the pipes, and so the call, open, and the
    watcher's ``waitpid`` is held until the cancellation has killed the group."""
    caplog.set_level(logging.WARNING)
    release = threading.Event()
    watchers: list[threading.Thread] = []
    waitpid = os.waitpid

    def held_waitpid(pid: int, options: int) -> tuple[int, int]:
        if options == 0:  # the child watcher's blocking wait, in a thread of its own
            watchers.append(threading.current_thread())
            release.wait(30)
        return waitpid(pid, options)

    monkeypatch.setattr(os, "waitpid", held_waitpid)
    command = "sleep 300 & echo $! > grandchild.pid; echo $$ > shell.pid"
    task = asyncio.create_task(run_shell(command, workdir=tmp_path, timeout=600))
    try:
        await wait_until(  # written, not only created: the shell opens the file before it writes
            lambda: all(_pid_in(tmp_path / n) for n in ("shell.pid", "grandchild.pid")), "pids"
        )
        shell, grandchild = (
            psutil.Process(int((tmp_path / n).read_text())) for n in ("shell.pid", "grandchild.pid")
        )
        await wait_until(lambda: shell.status() == psutil.STATUS_ZOMBIE, "the shell to exit")
        task.cancel()
        await wait_until(lambda: gone(grandchild), "the group to be killed")
        release.set()
        done, _ = await asyncio.wait({task}, timeout=30)
        assert done and task.cancelled()
        assert not shell.is_running(), "the call returned before its shell was reaped"
        for watcher in watchers:
            await asyncio.to_thread(watcher.join, 30)
        assert watchers and not any(w.is_alive() for w in watchers)
        assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    finally:
        release.set()


async def test_output_cap_truncates_and_notes_it_while_the_child_still_exits(tmp_path: Path) -> None:
    one_mb = 1024 * 1024
    command = f"head -c {one_mb} /dev/zero | tr '\\0' a; echo done >&2; exit 7"
    result = await run_shell(command, workdir=tmp_path, output_cap=1000)
    assert result.exit_code == 7  # the child wrote everything: it never blocked on a full pipe
    assert not result.timed_out
    assert result.stdout == "a" * 1000
    assert result.stdout_bytes == one_mb
    assert result.stderr == "done\n"
    assert result.truncated
    assert "truncated" in format_shell_result(result)
    assert str(one_mb) in format_shell_result(result)


async def test_both_streams_are_drained_concurrently(tmp_path: Path) -> None:
    # A flood on stderr first: reading stdout to the end first would deadlock on stderr's pipe.
    command = "head -c 1048576 /dev/zero >&2; echo out"
    result = await run_shell(command, workdir=tmp_path)
    assert not result.timed_out
    assert result.exit_code == 0
    assert result.stdout == "out\n"
    assert len(result.stderr) == 16_000
    assert result.stderr_bytes == 1024 * 1024
    assert result.truncated


async def test_event_loop_keeps_ticking_while_a_command_runs(tmp_path: Path) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    try:
        await asyncio.sleep(0.05)
        before = ticks
        result = await run_shell("sleep 0.5", workdir=tmp_path)
        during = ticks - before
    finally:
        ticking.cancel()
    assert result.exit_code == 0
    assert during >= 5  # a blocked loop would tick at most once during the run


async def test_a_command_can_wait_for_work_the_event_loop_does_meanwhile(tmp_path: Path) -> None:
    async def release() -> None:
        await asyncio.sleep(0.1)
        await asyncio.to_thread((tmp_path / "go").write_text, "go")

    releasing = asyncio.create_task(release())
    result = await run_shell("while [ ! -e go ]; do sleep 0.01; done; echo released", workdir=tmp_path)
    await releasing
    assert not result.timed_out
    assert result.stdout == "released\n"


async def test_invalid_utf8_output_is_replaced_not_raised(tmp_path: Path) -> None:
    result = await run_shell("printf '\\377\\376ok\\n'; printf 'bad\\300' >&2", workdir=tmp_path)
    assert result.stdout == "\ufffd\ufffdok\n"
    assert result.stderr == "bad\ufffd"
    assert result.exit_code == 0


async def test_truncation_never_cuts_a_character_in_half(tmp_path: Path) -> None:
    result = await run_shell("printf 'ééé'", workdir=tmp_path, output_cap=3)
    assert result.stdout == "é"
    assert result.truncated


async def test_death_by_signal_is_a_negative_exit_code(tmp_path: Path) -> None:
    result = await run_shell("kill -TERM $$", workdir=tmp_path)
    assert result.exit_code == -15
    assert not result.timed_out
    assert "SIGTERM" in format_shell_result(result)


async def test_invalid_limits_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="timeout"):
        await run_shell("true", workdir=tmp_path, timeout=0)
    with pytest.raises(ValueError, match="output_cap"):
        await run_shell("true", workdir=tmp_path, output_cap=-1)


def test_shell_tool_schema_is_an_openai_function_tool_with_a_required_command() -> None:
    assert SHELL_TOOL_SCHEMA["type"] == "function"
    function = SHELL_TOOL_SCHEMA["function"]
    assert function["name"] == "shell"
    assert function["description"]
    parameters = function["parameters"]
    assert parameters["type"] == "object"
    assert parameters["properties"]["command"]["type"] == "string"
    assert parameters["required"] == ["command"]
    assert json.loads(json.dumps(SHELL_TOOL_SCHEMA)) == SHELL_TOOL_SCHEMA
