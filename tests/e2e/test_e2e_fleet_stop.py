"""``/stop`` sent through one gateway of a fleet stops the turn another gateway is running.

Two gateways on one PostgreSQL schema, one turn slot each; two chats connected to the
first one start a long turn each, so one turn runs in each process (the recording agent's
journal says which). ``/stop`` for the chat whose turn runs in the *other* process stops
that turn at once (the notice crosses by ``LISTEN/NOTIFY``), and only that one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from support.postgres import DSN, pg_schema_fixture  # noqa: F401  (the pg_schema fixture)
from support.procs import FrameClient, GatewayProcess, wait_until
from support.recording_agent import read_journal

pytestmark = pytest.mark.slow
LAUNCHER = [sys.executable, str(Path(__file__).parents[1] / "support" / "recording_agent.py")]
LONG = "x" * 400  # 200 chunks of 2 characters, 100 ms apart: a 20 s turn


async def test_stop_through_one_process_stops_the_turn_running_in_another(
    tmp_path: Path, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = tmp_path / "turns.jsonl"
    monkeypatch.setenv("TURN_JOURNAL", str(journal))
    config = {
        "store": {"url": DSN, "postgres": {"schema": pg_schema}},
        "agent": {"echo": {"chunk_delay_ms": 100, "chunk_chars": 2}},
        "scheduler": {"max_concurrent_turns": 1},
        "shutdown": {"drain_seconds": 1},
    }
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    a, b = (GatewayProcess(tmp_path / name, config) for name in ("a", "b"))
    await a.start(launcher=LAUNCHER)
    await b.start(launcher=LAUNCHER)
    clients = [FrameClient(a.port, f"chat{i}", f"u{i}") for i in range(2)]
    try:
        for i, client in enumerate(clients):
            await client.connect()
            await client.message(f"m{i}", LONG)

        def starts() -> list[dict[str, object]]:
            return [e for e in read_journal(str(journal)) if e["ev"] == "start"] if journal.exists() else []

        await wait_until(lambda: len({e["pid"] for e in starts()}) == 2, 60, "a turn running in each process")
        assert a.proc is not None and b.proc is not None
        on_b = next(str(e["key"]) for e in starts() if e["pid"] == b.proc.pid)
        on_a = next(str(e["key"]) for e in starts() if e["pid"] == a.proc.pid)
        target = next(c for c in clients if on_b.endswith(c.chat_id))
        await target.message("stop-1", "/stop")

        def ended(key: str) -> list[dict[str, object]]:
            return [e for e in read_journal(str(journal)) if e["ev"] == "end" and e["key"] == key]

        await wait_until(lambda: bool(ended(on_b)), 10, "the turn in the other process to stop")
        assert ended(on_b)[0]["how"] == "stopped" and ended(on_b)[0]["pid"] == b.proc.pid
        assert ended(on_a) == [], "the other chat's turn was not touched"
    finally:
        for client in clients:
            await client.close()
        for gateway in (a, b):
            if gateway.proc is not None and gateway.proc.returncode is None:
                await gateway.terminate()
