"""The shell tool: run one command in a working directory without blocking the event loop.

The command runs as ``/bin/sh -c`` in a new session, so the whole process group can be
killed on timeout or cancellation, with a minimal environment and git guarded
(``launch.py``). Output is read from both pipes concurrently and stored up to a cap per
stream; past the cap it is still drained so the child never blocks on a full pipe.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from chatgate.agents.tools.launch import Launch, launched
from chatgate.agents.tools.sandbox import BwrapSandbox

_READ_CHUNK = 64 * 1024
_SETTLE_S = 5.0
"""After a kill, how long to wait for the pipes to close and the shell to be reaped."""

SHELL_TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "shell",
        "description": (
            "Run a shell command (/bin/sh -c) in the session's working directory and return its "
            "exit code, stdout and stderr. Long output is truncated; a command that runs too long "
            "is killed with its children. Dangerous commands wait for a human's approval."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line to run with /bin/sh -c."},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    },
}


class ShellResult(msgspec.Struct, frozen=True):
    """What a command did. ``exit_code`` is None when it was killed for timing out;
    negative (``-signal``) when something else killed it. The text the model reads is
    ``agents.tools.runner.format_shell_result``."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    duration: float
    stdout_bytes: int = 0
    """Bytes the command wrote to stdout, including any past the cap."""
    stderr_bytes: int = 0


class _Capture:
    """Keeps the first ``cap`` bytes of a stream and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.data)

    def text(self) -> str:
        # A cut in the middle of a character drops that character instead of showing U+FFFD.
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        return decoder.decode(bytes(self.data), final=not self.truncated)


async def _drain(stream: asyncio.StreamReader | None, capture: _Capture) -> None:
    if stream is None:
        return
    while chunk := await stream.read(_READ_CHUNK):
        capture.feed(chunk)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pgid, signal.SIGKILL)


def _close_pipes(process: asyncio.subprocess.Process) -> None:
    """Stop reading the pipes: a daemon that left the group may hold them open forever.

    Only the pipes: closing the subprocess transport itself would ``poll()`` the shell, and
    reaping it there races the child watcher's ``waitpid``, which then logs "Unknown child
    process pid ..." (a warning ``chatgate status`` would report). The transport closes itself
    once the watcher has reported the exit.
    """
    transport = getattr(process, "_transport", None)
    if transport is None:
        return
    for fd in (1, 2):
        pipe = transport.get_pipe_transport(fd)
        if pipe is not None:
            pipe.close()


def _kill_spawned(spawn: asyncio.Future[asyncio.subprocess.Process]) -> None:
    if spawn.cancelled() or spawn.exception() is not None:
        return
    process = spawn.result()
    _kill_group(process.pid)
    _close_pipes(process)


async def _spawn(launch: Launch, workdir: Path) -> asyncio.subprocess.Process:
    """Start ``argv`` (``/bin/sh -c command``) in a new session; a cancellation meanwhile kills the group.

    The shell runs (and may fork) as soon as it is forked, while ``create_subprocess_exec``
    still has to wire up its pipes. A cancellation that arrives then is handled by asyncio
    itself, which kills only the shell and waits for the pipes to close, and they stay open
    as long as any child still has them: the children would outlive the call and the call
    would not return. So the spawn is shielded, and when it is cancelled, the group is killed
    the moment the spawn completes.
    """
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *launch.argv,
            cwd=workdir,
            env=launch.env,
            pass_fds=launch.pass_fds,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    )
    try:
        return await asyncio.shield(spawn)
    except asyncio.CancelledError:
        spawn.add_done_callback(_kill_spawned)  # as soon as it is done, even if this wait is cancelled
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({spawn})  # a few loop iterations: the pipes are being connected
            if not spawn.cancelled() and spawn.exception() is None:
                await _reaped(spawn.result())
        raise


async def _reaped(process: asyncio.subprocess.Process) -> None:
    """After the kill: wait until the child watcher has reaped the shell; bounded, and a
    second cancellation stops the wait. Then a cancelled call returns with nothing left."""
    with contextlib.suppress(asyncio.CancelledError, TimeoutError):
        async with asyncio.timeout(_SETTLE_S):
            await process.wait()


async def run_shell(
    command: str,
    *,
    workdir: Path,
    timeout: float = 60.0,
    output_cap: int = 16_000,
    env: Mapping[str, str] | None = None,
    keep: Sequence[str] = (),
    sandbox: BwrapSandbox | None = None,
) -> ShellResult:
    """Run ``command`` with ``/bin/sh -c`` in ``workdir``; never blocks the event loop.

    ``output_cap`` is in bytes, per stream. The command gets a minimal environment
    (``env.command_env``): ``env`` is the gateway's (None: ``os.environ``), of which it sees
    only ``PATH`` and the variables ``keep`` names. With ``sandbox`` the shell runs inside it.
    Stdin is /dev/null. On timeout the process group is killed with SIGKILL; on cancellation
    too, and CancelledError propagates.
    """
    if timeout <= 0:
        raise ValueError("timeout must be > 0")
    if output_cap < 0:
        raise ValueError("output_cap must be >= 0")
    started = time.monotonic()
    async with launched(command, workdir, env, keep, sandbox) as launch:
        return await _run(launch, workdir, timeout, output_cap, started)


async def _run(launch: Launch, workdir: Path, timeout: float, output_cap: int, started: float) -> ShellResult:
    process = await _spawn(launch, workdir)
    out, err = _Capture(output_cap), _Capture(output_cap)
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(_drain(process.stdout, out), _drain(process.stderr, err))
                returncode: int | None = await process.wait()
        except TimeoutError:
            timed_out = True
            _kill_group(process.pid)
            returncode = await _settle(process, out, err)
    except BaseException:
        _kill_group(process.pid)
        _close_pipes(process)
        await _reaped(process)
        raise
    return ShellResult(
        exit_code=None if timed_out else returncode,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        truncated=out.truncated or err.truncated,
        duration=time.monotonic() - started,
        stdout_bytes=out.total,
        stderr_bytes=err.total,
    )


async def _settle(process: asyncio.subprocess.Process, out: _Capture, err: _Capture) -> int | None:
    """After the kill: keep what was already written, reap the shell; bounded."""
    try:
        async with asyncio.timeout(_SETTLE_S):
            await asyncio.gather(_drain(process.stdout, out), _drain(process.stderr, err))
            return await process.wait()
    except TimeoutError:
        _close_pipes(process)
        return process.returncode
