"""Delegation across SIGKILLs, with a real ``chatgate run`` and the echo agent (issue 19's acceptance).

The echo agent turns ``!delegate <task>`` into one ``delegate`` tool call; the child session
echoes the task slowly (so a kill can land while it runs), and its answer comes back to the
parent session as an inbox event, which the parent answers in the chat. Everything is read
from the database file:

- killed while the child runs: after the restart the child is resumed, and its completion
  reaches the parent exactly once, marked restored;
- killed after the child finished, before the parent answered the completion: after the
  restart the parent answers it exactly once (marked restored);
- ``/new`` in the chat while the child runs: the completion is dropped, with a log line;
- a delegated task older than ``delegation.max_age_hours`` at a restart is closed, not re-run.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.procs import FrameClient, GatewayProcess, wait_until

pytestmark = pytest.mark.slow
TASK = "count the sheep in the far field and report how many there are, slowly and carefully please"
CONFIG: dict[str, Any] = {
    "agent": {"echo": {"chunk_delay_ms": 60, "chunk_chars": 2}},
    "delegation": {"enabled": True},
}


def query(gateway: GatewayProcess, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(gateway.state_dir / "chatgate.db", timeout=30)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def task_row(gateway: GatewayProcess) -> tuple[str, str, str] | None:
    """(id, status, child key) of the one task, once it exists."""
    rows = query(gateway, "SELECT id, status, child_key FROM tasks")
    return rows[0] if rows else None  # type: ignore[return-value]


def child_running(gateway: GatewayProcess) -> bool:
    task = task_row(gateway)
    if task is None or task[1] != "running":
        return False
    claimed = query(
        gateway, "SELECT claimed_by FROM inbox WHERE session_key = ? AND status = 'queued'", task[2]
    )
    return bool(claimed) and claimed[0][0] is not None


def completion_finals(gateway: GatewayProcess) -> list[str]:
    return [
        r[0]
        for r in query(
            gateway, "SELECT text FROM outbox WHERE kind = 'final' AND text LIKE '%delegated task%'"
        )
    ]


async def dispatch(gateway: GatewayProcess, chat: str) -> FrameClient:
    client = FrameClient(gateway.port, chat, f"u-{chat}")
    await client.connect()
    await client.message("m1", f"!delegate {TASK}")
    return client


def assert_delivered_once(gateway: GatewayProcess, *, restored: bool) -> None:
    task = task_row(gateway)
    assert task is not None and task[1] == "done"
    arrivals = query(gateway, "SELECT COUNT(*) FROM inbox WHERE delivery_id = ?", f"task-done:{task[0]}")
    assert arrivals == [(1,)], "the completion reached the parent's inbox once"
    (final,) = completion_finals(gateway)
    assert f"[delegated task {task[0]} finished" in final and f"Result: echo: {TASK}" in final
    assert ("(restored after a gateway restart)" in final) is restored
    in_chat = query(gateway, "SELECT COUNT(*) FROM outbox WHERE session_key = ? AND kind = 'final'", task[2])
    assert in_chat == [(0,)], "the child's own answer never went to the chat"


@pytest.mark.timeout(240)
async def test_a_kill_while_the_child_runs_then_one_after_it_finished_deliver_each_completion_once(
    tmp_path: Path,
) -> None:
    for name in ("running", "finished"):
        (tmp_path / name).mkdir()
    gateway = GatewayProcess(tmp_path / "running", CONFIG)
    await gateway.start()
    client = await dispatch(gateway, "a")
    await wait_until(lambda: child_running(gateway), 60, "the child running")
    await client.close()
    await gateway.kill()
    await gateway.start()
    await wait_until(lambda: completion_finals(gateway), 90, "the parent's answer to the completion")
    assert await gateway.terminate() == 0
    assert_delivered_once(gateway, restored=True)
    task = task_row(gateway)
    assert task is not None
    (attempts,) = query(gateway, "SELECT attempts FROM inbox WHERE delivery_id = ?", f"task:{task[0]}")
    assert attempts == (2,), "the child was resumed, not run from scratch twice"

    after = GatewayProcess(tmp_path / "finished", CONFIG)
    await after.start()
    client = await dispatch(after, "b")

    def finished_not_answered() -> bool:
        done = task_row(after)
        return done is not None and done[1] == "done" and not completion_finals(after)

    await wait_until(finished_not_answered, 60, "the child finished, the parent not yet answered")
    await client.close()
    await after.kill()
    await after.start()
    await wait_until(lambda: completion_finals(after), 90, "the parent's answer after the restart")
    assert await after.terminate() == 0
    assert_delivered_once(after, restored=True)


@pytest.mark.timeout(180)
async def test_new_between_dispatch_and_completion_drops_it_with_a_log_line(tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path, CONFIG)
    await gateway.start()
    client = await dispatch(gateway, "c")
    await wait_until(lambda: child_running(gateway), 60, "the child running")
    await client.message("m2", "/new")
    await wait_until(
        lambda: (t := task_row(gateway)) is not None and t[1] != "running", 60, "the child ending"
    )
    task = task_row(gateway)
    assert task is not None and task[1] == "dropped"
    await wait_until(lambda: "completion was dropped" in gateway.logs(), 30, "the log line")
    assert await gateway.terminate() == 0
    assert query(gateway, "SELECT COUNT(*) FROM inbox WHERE delivery_id LIKE 'task-done:%'") == [(0,)]
    assert completion_finals(gateway) == []


@pytest.mark.timeout(180)
async def test_a_delegated_task_past_its_max_age_at_a_restart_is_closed_not_rerun(tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path, CONFIG)
    await gateway.start()
    client = await dispatch(gateway, "d")
    await wait_until(lambda: child_running(gateway), 60, "the child running")
    await client.close()
    await gateway.kill()
    old = {**CONFIG, "delegation": {"enabled": True, "max_age_hours": 1e-9}}  # anything running is too old
    gateway.config_path.write_text(yaml.safe_dump(old))
    await gateway.start()
    await wait_until(lambda: "closed at start-up" in gateway.logs(), 30, "the closing log line")
    assert await gateway.terminate() == 0
    task = task_row(gateway)
    assert task is not None and task[1] == "closed"
    (status,) = query(gateway, "SELECT status FROM inbox WHERE delivery_id = ?", f"task:{task[0]}")
    assert status == ("cancelled",), "the child was not run again"
    assert completion_finals(gateway) == []


@pytest.mark.timeout(180)
async def test_a_background_task_killed_mid_run_is_resumed_and_answers_the_chat_once(tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path, CONFIG)
    await gateway.start()
    client = FrameClient(gateway.port, "e", "u-e")
    await client.connect()
    await client.message("m1", f"/bg {TASK}")
    await wait_until(lambda: child_running(gateway), 60, "the task running")
    await client.close()
    await gateway.kill()
    await gateway.start()
    task = task_row(gateway)
    assert task is not None

    def answers() -> list[tuple[str, str]]:
        return query(gateway, "SELECT kind, text FROM outbox WHERE session_key = ? ORDER BY id", task[2])

    await wait_until(lambda: any(kind == "final" for kind, _ in answers()), 90, "the task's answer")
    assert await gateway.terminate() == 0
    kinds = [kind for kind, _ in answers()]
    assert kinds == ["notice", "final"], "the restart notice, then the answer, once"
    assert answers()[1][1] == f"echo: {TASK}"
    done = task_row(gateway)
    assert done is not None and done[1] == "done"
