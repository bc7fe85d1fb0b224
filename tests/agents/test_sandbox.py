"""tools.sandbox: bwrap (issue 12.1): an approved command reaches the work directory only.

Real bubblewrap, the real shell tool. The ``rm -rf /`` test first proves, through the same
runner, that the file system outside the work directory is read-only, and only then runs
the command: a broken sandbox fails the test instead of wiping the machine.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from chatgate.agents.tools.runner import ShellToolRunner
from chatgate.agents.tools.sandbox import BwrapSandbox, SandboxUnavailable
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
