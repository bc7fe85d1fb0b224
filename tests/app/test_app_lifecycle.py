"""Process lifecycle with real gateway processes: locks, --replace, SIGTERM, status/stop."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from chatgate.app.locks import LockRecord
from support.procs import ChatClient, GatewayProcess, wait_until

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-m", "chatgate.app.cli"]
FAST = {"agent": {"echo": {"chunk_delay_ms": 0}}}


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


async def _lock_names(state_dir: Path, pid: int, timeout: float = 10) -> None:
    """Wait until the lock record names ``pid``: the gateway rewrites it once it listens."""

    def names() -> bool:
        record = LockRecord.parse((state_dir / "gateway.lock").read_text())
        return record is not None and record.pid == pid

    await wait_until(names, timeout, f"the lock record to name pid {pid}")


async def _answered_once(url: str, chat: str, texts: list[str], timeout: float = 60) -> ChatClient:
    client = ChatClient(url, chat, [(f"{chat}-{i}", t) for i, t in enumerate(texts)], window=len(texts))
    stop = asyncio.Event()
    await asyncio.wait_for(client.run(stop), timeout)
    return client


@pytest.mark.timeout(360)  # 40 gateway starts: ~25 s alone, over 120 s next to the chaos test on 2 cores
async def test_two_gateways_started_together_on_one_state_dir_exactly_one_wins(tmp_path: Path) -> None:
    for attempt in range(20):
        run_dir = tmp_path / f"race{attempt}"
        (run_dir / "a").mkdir(parents=True)
        (run_dir / "b").mkdir()
        first = GatewayProcess(run_dir / "a", FAST)
        second = GatewayProcess(run_dir / "b", FAST)
        second.state_dir = first.state_dir
        await asyncio.gather(first.start(wait=False, port=0), second.start(wait=False, port=0))
        assert first.proc is not None and second.proc is not None
        done, pending = await asyncio.wait(
            {asyncio.ensure_future(first.proc.wait()), asyncio.ensure_future(second.proc.wait())},
            timeout=30,
            return_when=asyncio.FIRST_COMPLETED,
        )
        assert len(done) == 1, f"attempt {attempt}: expected exactly one loser"
        loser, winner = (first, second) if first.proc.returncode is not None else (second, first)
        assert loser.proc is not None and loser.proc.returncode == 78, loser.logs()
        assert "already running" in loser.logs() and "--replace" in loser.logs()
        await asyncio.sleep(0.2)
        assert winner.proc is not None and winner.proc.returncode is None, "the winner keeps running"
        assert await winner.terminate() == 0
        for task in pending:
            task.cancel()


async def test_a_sigterm_while_the_parts_are_built_ends_the_start_with_0_even_if_code_catches_it(
    tmp_path: Path,
) -> None:
    gateway = GatewayProcess(tmp_path, FAST)
    await gateway.start(
        wait=False, launcher=[sys.executable, str(Path(__file__).with_name("stop_while_building.py"))]
    )
    assert gateway.proc is not None
    # before: the handler raised into the broad `except`, the stop was lost and the gateway ran on
    assert await asyncio.wait_for(gateway.proc.wait(), 60) == 0, gateway.logs()
    assert "stopped before it finished starting; nothing had started" in gateway.logs()
    assert " is running: " not in gateway.logs()


async def test_lock_left_by_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    dead = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await dead.wait()
    gateway = GatewayProcess(tmp_path, FAST)
    gateway.state_dir.mkdir(parents=True)
    stale = LockRecord(dead.pid, 1.0, ["chatgate", "run"], "0.0.1", time.time() - 100)
    (gateway.state_dir / "gateway.lock").write_text(json.dumps(_as_dict(stale)))
    await gateway.start()
    try:
        await _lock_names(gateway.state_dir, gateway.proc.pid)  # type: ignore[union-attr]
        assert "did not shut down cleanly" in gateway.logs()
    finally:
        assert await gateway.terminate() == 0


async def test_lock_naming_a_live_pid_with_another_start_time_is_taken_over(tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path, FAST)
    gateway.state_dir.mkdir(parents=True)
    me = psutil.Process()
    reused = LockRecord(me.pid, me.create_time() - 1000, ["chatgate", "run"], "0.0.1", time.time())
    (gateway.state_dir / "gateway.lock").write_text(json.dumps(_as_dict(reused)))
    await gateway.start()
    try:
        await _lock_names(gateway.state_dir, gateway.proc.pid)  # type: ignore[union-attr]
    finally:
        assert await gateway.terminate() == 0
    assert psutil.pid_exists(me.pid), "a recycled pid is never signalled"


def test_lock_file_the_gateway_cannot_open_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    lock = state / "gateway.lock"
    lock.write_text("")
    # An immutable file cannot be opened for writing even by root: the stand-in for a lock
    # left by another user (as root, permissions alone would not stop the test process).
    if subprocess.run(["chattr", "+i", str(lock)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported on this filesystem")
    try:
        result = _cli("run", "--state-dir", str(state), "--port", "0")
    finally:
        subprocess.run(["chattr", "-i", str(lock)], check=True)
    assert result.returncode == 78, result.stderr
    assert "cannot open the gateway lock" in result.stderr
    assert "remove it as its owner" in result.stderr
    assert "Traceback" not in result.stderr


async def test_replace_stops_the_old_gateway_reaps_its_orphaned_child_and_loses_nothing(
    tmp_path: Path,
) -> None:
    child_pid_file = tmp_path / "child.pid"
    launcher = [
        sys.executable,
        "-c",
        "import runpy, subprocess, sys; "
        f"c = subprocess.Popen(['sleep', '600']); open({str(child_pid_file)!r}, 'w').write(str(c.pid)); "
        "sys.argv = ['chatgate'] + sys.argv[1:]; runpy.run_module('chatgate.app.cli', run_name='__main__')",
    ]
    slow = {"agent": {"echo": {"chunk_delay_ms": 200}}, "shutdown": {"drain_seconds": 0.5}}
    old = GatewayProcess(tmp_path, slow)
    await old.start(launcher=launcher)
    assert old.proc is not None
    child = psutil.Process(int(child_pid_file.read_text()))
    assert child.ppid() == old.proc.pid
    url = f"ws://127.0.0.1:{old.port}/ws"

    texts = [f"before replace {i}" for i in range(5)]
    client = ChatClient(url, "replace-chat", [(f"r{i}", t) for i, t in enumerate(texts)], window=5)
    stop = asyncio.Event()
    running = asyncio.create_task(client.run(stop))
    await wait_until(lambda: len(client.acked) == 5, 60, "the five messages acknowledged")

    new = GatewayProcess(tmp_path, FAST, port=old.port)
    new.state_dir = old.state_dir
    await new.start("--replace", wait=False)
    try:
        assert await asyncio.wait_for(old.proc.wait(), 60) == 0, "the old gateway stopped cleanly"
        await new.wait_ready()
        await wait_until(lambda: _gone(child), 30, "the old gateway's orphaned child reaped")
        await asyncio.wait_for(running, 60)
        for mid, text in client.messages:
            assert set(client.finals[mid]) == {(client.finals[mid][0][0], f"echo: {text}")}
        assert "replaced gateway pid" in new.logs()
    finally:
        stop.set()
        assert await new.terminate() == 0


async def test_sigterm_during_twenty_slow_turns_exits_within_budget_and_loses_nothing(tmp_path: Path) -> None:
    budget = {"drain_seconds": 1, "outbox_flush_seconds": 2, "adapter_close_seconds": 2}
    slow = {"agent": {"echo": {"chunk_delay_ms": 1000, "chunk_chars": 2}}, "shutdown": budget}
    gateway = GatewayProcess(tmp_path, slow)
    await gateway.start()
    url = f"ws://127.0.0.1:{gateway.port}/ws"
    clients = [ChatClient(url, f"slow{i}", [(f"s{i}", f"slow turn {i}")]) for i in range(20)]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(c.run(stop)) for c in clients]
    await wait_until(lambda: all(c.acked for c in clients), 60, "all twenty messages acknowledged")
    await asyncio.sleep(1.5)  # every turn has started streaming and none can have finished

    assert gateway.proc is not None
    started = time.monotonic()
    exit_code = await gateway.terminate(timeout=sum(budget.values()) + 10)
    took = time.monotonic() - started
    assert exit_code == 0, gateway.logs()

    gateway.config_path.write_text(json.dumps(FAST))
    await gateway.start()
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
    finally:
        stop.set()
        assert await gateway.terminate() == 0
    for client in clients:
        ((mid, text),) = client.messages
        assert set(client.finals[mid]) == {(client.finals[mid][0][0], f"echo: {text}")}
    db = sqlite3.connect(gateway.state_dir / "chatgate.db")
    try:
        assert db.execute("SELECT COUNT(*) FROM outbox WHERE kind = 'final'").fetchone() == (20,)
    finally:
        db.close()
    print(f"SIGTERM to exit: {took:.2f}s")


async def test_status_and_stop_report_a_running_and_a_stopped_gateway(tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path, FAST)
    state = str(gateway.state_dir)
    stopped = _cli("status", "--json", "--state-dir", state)
    assert stopped.returncode == 3
    assert json.loads(stopped.stdout) == {"running": False, "state_dir": str(gateway.state_dir.resolve())}

    await gateway.start()
    assert gateway.proc is not None
    running = await asyncio.to_thread(_cli, "status", "--json", "--state-dir", state)
    assert running.returncode == 0, running.stderr
    info = json.loads(running.stdout)
    assert info["running"] is True and info["pid"] == gateway.proc.pid
    assert info["adapters"]["web"]["connected"] is True
    assert info["queue_depth"] == 0 and "uptime_seconds" in info and "version" in info

    human = await asyncio.to_thread(_cli, "status", "--state-dir", state)
    assert f"pid {gateway.proc.pid}" in human.stdout
    rows = human.stdout.splitlines()[1:]
    assert any(r.lstrip().startswith("adapter web:") for r in rows), human.stdout
    values_start = {len(r) - len(r[r.index(":") + 1 :].lstrip()) for r in rows}
    assert len(values_start) == 1, f"the status values are not aligned:\n{human.stdout}"

    result = await asyncio.to_thread(_cli, "stop", "--state-dir", state)
    assert result.returncode == 0, result.stderr
    assert f"stopped pid {gateway.proc.pid}" in result.stdout
    assert await asyncio.wait_for(gateway.proc.wait(), 10) == 0
    after = await asyncio.to_thread(_cli, "status", "--json", "--state-dir", state)
    assert after.returncode == 3 and json.loads(after.stdout)["running"] is False


def _as_dict(record: LockRecord) -> dict[str, object]:
    from msgspec.structs import asdict

    return asdict(record)


def _gone(proc: psutil.Process) -> bool:
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_a_start_logs_one_line_naming_version_state_store_agent_and_platforms(tmp_path: Path) -> None:
    """What an operator reads after an incident: which build ran on which database, with what."""
    from chatgate import __version__

    gateway = GatewayProcess(tmp_path, FAST)
    await gateway.start()
    try:
        lines = [line for line in gateway.logs().splitlines() if " started: state dir " in line]
    finally:
        await gateway.terminate()
    assert len(lines) == 1, gateway.logs()
    state = gateway.state_dir.resolve()
    assert (
        f"chatgate {__version__} started: state dir {state}, store sqlite {state / 'chatgate.db'}" in lines[0]
    )
    assert "agent echo, platforms web (connected: 0 browser connection(s))" in lines[0]
