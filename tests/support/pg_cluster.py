"""A private PostgreSQL server for one test, that the test may stop and start at will.

The machine's shared PostgreSQL serves every other test, so a test that takes the
database down needs a server of its own: ``initdb`` into a fresh directory, ``pg_ctl``
to start it on a port of this worker's slice (``free_port``) with its unix socket in
that directory, and at teardown an immediate stop and the directory removed. initdb
refuses to run as root, so as root every server command runs as the ``postgres`` OS
user (``runuser``), in a directory that user owns (a test's ``tmp_path`` is private to
root). Where the binaries or that user are missing the test is skipped with the reason,
except under ``CI=true``, where it fails: CI must run it.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from support.procs import free_port

BIN = Path(os.environ.get("CHATGATE_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
OS_USER = "postgres"
COMMAND_SECONDS = 60.0
"""Bound on one initdb, start or stop (a loaded 2-core machine takes a few seconds)."""


def _missing() -> str | None:
    """Why a private server cannot run here, or None."""
    for tool in ("initdb", "pg_ctl", "postgres"):
        if not (BIN / tool).is_file():
            return f"{BIN / tool} not found (set CHATGATE_TEST_PG_BIN to PostgreSQL's bin directory)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(OS_USER)
        except KeyError:
            return f"running as root and there is no {OS_USER!r} OS user to run initdb as"
        if shutil.which("runuser") is None:
            return "running as root and runuser is not installed"
    return None


def require_private_postgres() -> None:
    reason = _missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"a private PostgreSQL cannot run: {reason}")
    pytest.skip(f"a private PostgreSQL cannot run: {reason}")


class PrivateCluster:
    """One PostgreSQL server in its own directory: ``init`` once, then ``start``/``stop`` freely."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.data = root / "data"
        self.port = port
        self.log = root / "server.log"
        self.dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    async def _run(self, *args: str) -> str:
        command = [str(BIN / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", OS_USER, "--", *command]
        proc = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=self.root
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), COMMAND_SECONDS)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AssertionError(f"{args[0]} did not finish within {COMMAND_SECONDS:g} s") from None
        text = out.decode(errors="replace")
        if proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}):\n{text}\n{self.server_log()}")
        return text

    def server_log(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    async def init(self) -> None:
        await self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"
        )

    async def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=60"
        await self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start"
        )

    async def stop(self, mode: str = "fast") -> None:
        """``fast``: roll back open transactions, cut every client, checkpoint, exit."""
        await self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    async def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()


@pytest.fixture(name="private_pg")
async def private_pg_fixture() -> AsyncIterator[PrivateCluster]:
    """A running private server; stopped (immediately) and removed at teardown."""
    require_private_postgres()
    root = Path(tempfile.mkdtemp(prefix="chatgate-pg-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam(OS_USER)
        os.chown(root, user.pw_uid, user.pw_gid)
    cluster = PrivateCluster(root, free_port())
    try:
        await cluster.init()
        await cluster.start()
        yield cluster
    finally:
        try:
            if await cluster.running():
                await cluster.stop("immediate")
        finally:
            shutil.rmtree(root, ignore_errors=True)
