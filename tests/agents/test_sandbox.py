"""tools.sandbox: bwrap (issues 12.1 and 27): an approved command reaches the work directory only.

Real bubblewrap, the real shell tool. The ``rm -rf /`` test first proves, through the same
runner, that the file system outside the work directory is read-only, and only then runs
the command: a broken sandbox fails the test instead of wiping the machine. Issue 27: no
host Unix socket is reachable (the machine's real PostgreSQL socket, a socket the test
listens on outside the hidden directories, an abstract one with the network shared), and
the state directory, /run, /var/run and the homes are hidden.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
import sysconfig
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from chatgate.agents.tools.runner import ShellToolRunner
from chatgate.agents.tools.sandbox import BwrapSandbox, SandboxUnavailable
from chatgate.agents.tools.seccomp import NoFilter, unix_socket_filter
from support.approval_harness import MakeApprovals, make_approvals
from support.procs import GatewayProcess

__all__ = ["make_approvals"]

if shutil.which("bwrap") is None and not os.environ.get("CI"):
    pytest.skip("bubblewrap is not installed here (.ci/run installs it)", allow_module_level=True)


HOST_FILES = (Path("/usr/bin/env"), Path(sys.executable))


def exists_on_host(path: str) -> bool:
    return Path(path).exists()


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory on the real root file system (not /tmp, which the sandbox replaces)."""
    path = Path("/var/tmp") / f"chatgate-sandbox-{uuid.uuid4().hex}"
    path.mkdir()
    (path / "marker").write_text("still here")
    yield path
    shutil.rmtree(path)


def sandboxed(workdir: Path, *, network: bool = False, timeout_s: float = 60.0) -> ShellToolRunner:
    return ShellToolRunner(workdir, timeout_s, 4096, BwrapSandbox(workdir, network))


def populated(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "src" / "deep").mkdir(parents=True)
    (work / "src" / "deep" / "a.txt").write_text("a")
    (work / "top.txt").write_text("t")
    return work


async def test_an_approved_rm_rf_root_leaves_the_host_untouched(tmp_path: Path, outside: Path) -> None:
    work = populated(tmp_path)
    beside = tmp_path / "beside.txt"  # outside the work directory, under the host's /tmp
    beside.write_text("b")
    shell = sandboxed(work, timeout_s=600.0)
    probe = await shell.execute(f"touch {outside}/probe /usr/probe 2>&1; ls {outside}", "probe")
    if (outside / "probe").exists() or "Read-only file system" not in probe.content:
        pytest.fail(
            f"the sandbox is not read-only outside the work directory; not running rm: {probe.content}"
        )

    result = await shell.execute("rm -rf --no-preserve-root /", "c1")

    assert result.status == "ok" and "Read-only file system" in result.content
    assert (outside / "marker").read_text() == "still here"
    assert beside.read_text() == "b"
    assert all(path.exists() for path in HOST_FILES)
    assert list(work.iterdir()) == []  # inside the work directory rm did what rm does


async def test_no_network_a_private_tmp_and_writes_only_in_the_work_directory(
    tmp_path: Path, outside: Path
) -> None:
    work = populated(tmp_path)
    tag = uuid.uuid4().hex
    host_tmp = Path("/tmp") / f"chatgate-host-{tag}"
    host_tmp.write_text("host")
    try:
        result = await sandboxed(work).execute(
            f"cat /proc/net/dev; ls {host_tmp} 2>&1; echo inner > /tmp/inner-{tag}; cat /tmp/inner-{tag};"
            f" echo x > {outside}/x 2>&1; echo ok > made.txt",
            "c1",
        )
    finally:
        host_tmp.unlink()
    interfaces = {line.split(":")[0].strip() for line in result.content.splitlines() if ":" in line}
    assert "lo" in interfaces and not interfaces & set(psutil.net_if_addrs()) - {"lo"}
    assert "No such file or directory" in result.content and "inner" in result.content
    assert not exists_on_host(f"/tmp/inner-{tag}")
    assert not (outside / "x").exists() and "Read-only file system" in result.content
    assert (work / "made.txt").read_text() == "ok\n"


async def test_sandbox_network_shares_the_hosts_network(tmp_path: Path) -> None:
    result = await sandboxed(populated(tmp_path), network=True).execute("cat /proc/net/dev", "c1")
    interfaces = {line.split(":")[0].strip() for line in result.content.splitlines() if ":" in line}
    assert interfaces >= set(psutil.net_if_addrs())


async def test_a_timed_out_sandboxed_command_is_killed_with_everything_it_started(tmp_path: Path) -> None:
    work = populated(tmp_path)
    tag = uuid.uuid4().hex
    result = await sandboxed(work, timeout_s=1.0).execute(f"sleep 300 & sleep 301 # {tag}", "c1")
    assert result.status == "error" and "killed after the 1 s timeout" in result.content
    for _ in range(100):
        left = [p for p in psutil.process_iter(["cmdline"]) if tag in " ".join(p.info["cmdline"] or [])]
        if not left:
            break
        await asyncio.sleep(0.05)
    assert left == []


def test_a_missing_bwrap_is_refused_with_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        BwrapSandbox(tmp_path, binary="bwrap-not-installed-here").check()


def test_a_bwrap_that_cannot_sandbox_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="cannot create its sandbox"):
        BwrapSandbox(tmp_path, binary="false").check()  # runs, and fails like a refused namespace
    BwrapSandbox(tmp_path).check()  # the real one works here


async def test_the_gateway_refuses_to_start_when_the_sandbox_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "no-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # the gateway's python is absolute; bwrap is not found
    config = {"tools": {"enabled": True, "sandbox": "bwrap"}, "platforms": {"web": {"enabled": True}}}
    gateway = GatewayProcess(tmp_path, config)
    await gateway.start(wait=False)
    assert gateway.proc is not None
    code = await asyncio.wait_for(gateway.proc.wait(), 60)
    assert code == 78, gateway.logs()
    assert "tools.sandbox" in gateway.logs() and "bubblewrap" in gateway.logs()
    assert "is running" not in gateway.logs()


async def test_an_rm_rf_root_asks_and_once_approved_runs_in_the_sandbox_harmlessly(
    tmp_path: Path, outside: Path, make_approvals: MakeApprovals
) -> None:
    """The whole path: the turn's call asks (unproven: `/` is outside), a human approves
    once, and the approved command runs through the real shell tool inside bwrap."""
    h = await make_approvals(sandbox=True)
    probe = await sandboxed(h.workdir).execute(f"touch {outside}/probe 2>&1", "probe")
    if (outside / "probe").exists() or "Read-only file system" not in probe.content:
        pytest.fail(
            f"the sandbox is not read-only outside the work directory; not running rm: {probe.content}"
        )
    (h.workdir / "src").mkdir()
    (h.workdir / "src" / "a.txt").write_text("a")
    await h.send("!sh rm -rf --no-preserve-root /")
    turn = h.sent[-1]
    prompt = await h.prompt()
    assert [o.id for o in prompt.options] == ["once", "deny"]
    assert "recursive_delete" in prompt.text and "`/`, outside the work directory" in prompt.text
    await h.tap(prompt.prompt_id, "once")
    final = await h.final_for(h.btn, turn, timeout=600.0)
    assert final.startswith("exit code 1") and "Read-only file system" in final
    assert (outside / "marker").read_text() == "still here"
    assert list(h.workdir.iterdir()) == []


PG_DIR = Path("/var/run/postgresql")
PG_SOCKET = PG_DIR / ".s.PGSQL.5432"
COUNT_ENTRIES = 'for d in /run /var/run /home /root; do echo "$d has $(ls -A $d | wc -l)"; done'
EMPTY = ["/run has 0", "/var/run has 0", "/home has 0", "/root has 0"]
CONNECT = (
    'python3 -c "import socket; s=socket.socket(socket.{family});'
    " s.connect({address!r}); print('connected')\""
)


IO_URING_SETUP = (
    'python3 -c "import ctypes; libc = ctypes.CDLL(None, use_errno=True);'
    ' print(libc.syscall(425, 1, 0), ctypes.get_errno())"'
)


def connect(address: str, family: str = "AF_UNIX") -> str:
    return CONNECT.format(family=family, address=address)


@pytest.fixture
def listening(outside: Path) -> Iterator[str]:
    """A Unix socket the test listens on, in /var/tmp: no hidden directory covers it."""
    path = str(outside / "host.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(8)
    yield path
    server.close()


@pytest.mark.skipif(not PG_SOCKET.exists() or shutil.which("psql") is None, reason="no local PostgreSQL")
async def test_the_hosts_postgresql_socket_is_unreachable_inside_and_reachable_outside(
    tmp_path: Path,
) -> None:
    """The issue's case: an approved ``psql -h /run/postgresql`` created a table on the host."""
    work = populated(tmp_path)
    table = f"chatgate_sandbox_probe_{uuid.uuid4().hex[:12]}"
    psql = f"psql -h {PG_DIR} -U postgres -d test -Atc"
    exists = f"{psql} \"select count(*) from pg_tables where tablename = '{table}'\""
    plain = ShellToolRunner(work, 60.0, 4096)

    try:
        inside = await sandboxed(work).execute(
            f"{psql} 'create table {table} (x int)' 2>&1; echo psql=$?; {connect(str(PG_SOCKET))} 2>&1;"
            f" {COUNT_ENTRIES}",
            "c1",
        )
        assert "psql=2" in inside.content and "CREATE TABLE" not in inside.content, inside.content
        assert "connected" not in inside.content
        assert all(line in inside.content.splitlines() for line in EMPTY), inside.content
        outside = await plain.execute(f"{exists}; {connect(str(PG_SOCKET))}", "c2")
        assert outside.content.splitlines()[2:4] == ["0", "connected"], outside.content  # it works here
    finally:  # a broken sandbox must not leave the probe in the shared database
        await plain.execute(f"{psql} 'drop table if exists {table}'", "cleanup")


async def test_no_host_unix_socket_is_reachable_wherever_it_is(tmp_path: Path, listening: str) -> None:
    """Hiding /run is not enough: a socket can live anywhere. The seccomp filter refuses them all,
    with the network shared too (which shares the abstract sockets)."""
    work = populated(tmp_path)
    abstract = socket.socket(socket.AF_UNIX)
    name = f"\0chatgate-test-{uuid.uuid4().hex}"
    abstract.bind(name)
    abstract.listen(1)
    try:
        probe = f"{connect(listening)} 2>&1; {connect(name)} 2>&1; ls {Path(listening).parent}"
        for network in (False, True):
            inside = await sandboxed(work, network=network).execute(probe, "c1")
            assert "connected" not in inside.content, (network, inside.content)
            assert inside.content.count("PermissionError") == 2 and "host.sock" in inside.content
        outside = await ShellToolRunner(work, 60.0, 4096).execute(probe, "c2")
        assert outside.content.count("connected") == 2, outside.content
        uring = await sandboxed(work).execute(IO_URING_SETUP, "c4")
        assert "-1 38" in uring.content, uring.content  # ENOSYS: no socket behind the filter's back
        pair = await sandboxed(work).execute(
            "python3 -c \"import socket; a, b = socket.socketpair(); a.send(b'x'); print(b.recv(1))\"", "c3"
        )
        assert "b'x'" in pair.content  # a process's own socket pairs still work
    finally:
        abstract.close()


async def test_the_state_directory_run_and_every_home_are_hidden(tmp_path: Path) -> None:
    """The default layout: the work directory inside the state directory, which holds the database."""
    state = tmp_path / "state"
    work = state / "workdir"
    work.mkdir(parents=True)
    (state / "chatgate.db").write_text("secret rows")
    (state / "chatgate.yaml").write_text("token: secret")
    box = BwrapSandbox(work, hide=(state,))
    result = await ShellToolRunner(work, 60.0, 8192, box).execute(
        f"ls -A {state}; cat {state}/chatgate.db 2>&1; {COUNT_ENTRIES}; echo ok > made.txt;"
        " cat /etc/os-release | head -n 1",
        "c1",
    )
    out = result.content
    assert "secret" not in out and "No such file or directory" in out, out
    assert "workdir" in out  # the state directory shows only the way to the work directory
    assert all(line in out.splitlines() for line in EMPTY), out
    assert (work / "made.txt").read_text() == "ok\n" and "NAME=" in out  # what stays readable
    seen = await ShellToolRunner(work, 60.0, 8192).execute(f"ls -A {state}", "c2")
    assert "chatgate.db" in seen.content  # the same command outside the sandbox sees it


async def test_a_hidden_directory_inside_the_work_directory_stays_hidden(tmp_path: Path) -> None:
    work = populated(tmp_path)
    (work / "state").mkdir()
    (work / "state" / "chatgate.db").write_text("secret rows")
    box = BwrapSandbox(work, hide=(work / "state",))
    result = await ShellToolRunner(work, 60.0, 4096, box).execute("ls -A state; cat top.txt", "c1")
    assert "chatgate.db" not in result.content and "t" in result.content


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs /usr/bin/python3")
async def test_pytest_asks_even_in_the_sandbox_and_its_conftest_never_runs_unasked(
    make_approvals: MakeApprovals, monkeypatch: pytest.MonkeyPatch, outside: Path
) -> None:
    """Issue 27, finding 2: ``pytest`` ran ``conftest.py`` unasked under the sandbox and read the
    gateway's secrets. Now it asks, saying why; approved once, its conftest runs in the sandbox
    and finds no secret in its environment.

    The sandbox hides every home and gives /tmp a fresh tmpfs, and this venv may live in either
    (its Python in /root/.pyenv; a clone made with mktemp under /tmp), so the ``pytest`` on PATH
    here runs a copy of this venv's real pytest, kept in ``outside`` (on the real root file
    system, which the sandbox shows read-only), with the system's Python 3.11.
    """
    site = Path(sysconfig.get_paths()["purelib"])
    copy = outside / "site"
    for name in ("_pytest", "pytest", "pluggy", "iniconfig", "packaging"):
        shutil.copytree(site / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(site / "py.py", copy / "py.py")
    tools = outside / "bin"
    tools.mkdir()
    (tools / "pytest").write_text(f'#!/bin/sh\nPYTHONPATH={copy} exec /usr/bin/python3 -m pytest "$@"\n')
    (tools / "pytest").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    secret = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    h = await make_approvals(sandbox=True)
    (h.workdir / "conftest.py").write_text(
        "import os, pathlib\n"
        "pathlib.Path('conftest-ran').write_text(os.environ.get('OPENAI_API_KEY', 'none'))\n"
    )
    (h.workdir / "test_x.py").write_text("def test_x():\n    pass\n")
    await h.send("!sh pytest -q -p no:cacheprovider")
    turn = h.sent[-1]
    prompt = await h.prompt()
    assert [o.id for o in prompt.options] == ["once", "deny"]
    assert "`pytest` runs code from the work directory (conftest.py, setup.py, Makefile…)" in prompt.text
    assert not (h.workdir / "conftest-ran").exists()
    await h.tap(prompt.prompt_id, "once")
    final = await h.final_for(h.btn, turn, timeout=120.0)
    assert "1 passed" in final, final
    assert (h.workdir / "conftest-ran").read_text() == "none"


def test_a_machine_without_a_seccomp_filter_refuses_the_sandbox() -> None:
    with pytest.raises(NoFilter, match="not ppc64le"):
        unix_socket_filter("ppc64le")
    assert len(unix_socket_filter("x86_64")) == len(unix_socket_filter("aarch64")) == 13 * 8
