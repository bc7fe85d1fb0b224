"""``chatgate schedules list|pause|resume|delete`` against a real database file, as the operator runs it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from chatgate.app.cli.main import main
from chatgate.domain.schedules import Schedule, ScheduleTarget
from chatgate.domain.source import Source
from chatgate.store.sqlite import SqliteStore


async def seeded(state: Path) -> None:
    store = SqliteStore(state / "chatgate.db")
    await store.open()
    target = ScheduleTarget(Source("web", "ops"), "agent:main:web:dm:ops")
    await store.save_schedule(Schedule("config:tick", "every", "60", "tick", target, "config", 2e9, 1.0))
    await store.save_schedule(Schedule("ab12cd34", "once", "2e9", "stretch", target, "chat", 2e9, 2.0))
    await store.close()


async def schedule_ids(state: Path) -> list[str]:
    store = SqliteStore(state / "chatgate.db")
    await store.open()
    try:
        return [s.id for s in await store.list_schedules()]
    finally:
        await store.close()


def test_list_pause_resume_and_delete(tmp_path: Path, capsys: Any) -> None:
    """Synchronous, as the command runs: it runs its own event loop (``asyncio.run``)."""
    state = tmp_path / "state"
    state.mkdir()
    asyncio.run(seeded(state))
    args = ["--state-dir", str(state)]
    assert main(["schedules", "list", *args]) == 0
    out = capsys.readouterr().out
    assert "config:tick: every 1m" in out and "ab12cd34: once" in out and "agent:main:web:dm:ops" in out
    assert main(["schedules", "pause", "config:tick", *args]) == 0
    assert "(paused)" in (main(["schedules", "list", *args]), capsys.readouterr().out)[1]
    assert main(["schedules", "resume", "config:tick", *args]) == 0
    assert main(["schedules", "delete", "config:tick", *args]) == 0
    assert "comes back at the next start" in capsys.readouterr().out
    assert main(["schedules", "delete", "config:tick", *args]) == 1
    assert "no schedule 'config:tick'" in capsys.readouterr().err
    assert asyncio.run(schedule_ids(state)) == ["ab12cd34"]


def test_without_a_database_list_says_so_and_a_change_fails(tmp_path: Path, capsys: Any) -> None:
    args = ["--state-dir", str(tmp_path / "none")]
    assert main(["schedules", "list", *args]) == 0
    assert "No database" in capsys.readouterr().out
    assert main(["schedules", "pause", "x", *args]) == 1
