"""What one shell command is started with, made before it starts and removed after it ends.

The argument vector (``/bin/sh -c``, or bubblewrap around it), the minimal environment
(``env.py``), a fresh git guard directory (``git_guard.py``) and, in the sandbox, the seccomp
filter on a pipe (``seccomp.py``). Making them touches the file system, so it runs in a
thread (``prepare``), never on the event loop; ``Launch.close`` undoes it, in a thread too.
Anything that cannot be made stops the command from starting (fail closed): a command never
runs with git unguarded or without the filter.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

import msgspec

from chatgate.agents.tools import git_guard
from chatgate.agents.tools.env import command_env, search_path
from chatgate.agents.tools.sandbox import BwrapSandbox
from chatgate.agents.tools.seccomp import NoFilter, unix_socket_filter


class Launch(msgspec.Struct):
    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    guard: git_guard.Guard | None = None

    def close(self) -> None:
        """Close the filter's pipe and delete the guard directory. Blocking."""
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pass_fds = ()
        if self.guard is not None:
            self.guard.remove()
            self.guard = None


def prepare(
    command: str,
    workdir: Path,
    source: Mapping[str, str] | None,
    keep: Sequence[str],
    sandbox: BwrapSandbox | None,
) -> Launch:
    """Everything ``command`` starts with. Blocking; raises OSError or ValueError when it cannot."""
    given = os.environ if source is None else source
    install = git_guard.find_git(search_path(given.get("PATH"), workdir))
    parent = Path(tempfile.gettempdir())
    if install is not None and _inside(parent, workdir):
        raise ValueError(
            f"the temporary directory {parent} is inside the work directory; set TMPDIR elsewhere"
        )
    launch = Launch([], {})
    try:
        launch.guard = git_guard.Guard.build(parent, install) if install is not None else None
        launch.env = command_env(given, workdir, keep, launch.guard)
        if sandbox is None:
            launch.argv = ["/bin/sh", "-c", command]
            return launch
        try:
            program = unix_socket_filter()
        except NoFilter as exc:
            raise ValueError(str(exc)) from exc
        read, write = os.pipe()
        launch.pass_fds = (read,)
        try:
            os.write(write, program)
        finally:
            os.close(write)
        binds = (str(launch.guard.root),) if launch.guard is not None else ()
        launch.argv = sandbox.argv(command, binds=binds, seccomp_fd=read)
    except BaseException:
        launch.close()
        raise
    return launch


@contextlib.asynccontextmanager
async def launched(
    command: str,
    workdir: Path,
    source: Mapping[str, str] | None,
    keep: Sequence[str],
    sandbox: BwrapSandbox | None,
) -> AsyncIterator[Launch]:
    """``prepare`` in a thread; the result is closed (in a thread) however the block ends."""
    making = asyncio.ensure_future(asyncio.to_thread(prepare, command, workdir, source, keep, sandbox))
    try:
        launch = await asyncio.shield(making)
    except asyncio.CancelledError:  # it is still being made: close it once it is
        making.add_done_callback(_close_later)
        raise
    try:
        yield launch
    finally:
        await asyncio.shield(asyncio.to_thread(launch.close))


def _close_later(made: asyncio.Future[Launch]) -> None:
    if not made.cancelled() and made.exception() is None:
        asyncio.get_running_loop().run_in_executor(None, made.result().close)


def _inside(path: Path, directory: Path) -> bool:
    path_s, directory_s = os.path.realpath(path), os.path.realpath(directory)
    return path_s == directory_s or path_s.startswith(directory_s.rstrip("/") + "/")
