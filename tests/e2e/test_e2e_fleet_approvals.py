"""An approval across the fleet: the turn waits on process A, the answer comes in through B.

Two gateway processes on one PostgreSQL schema, the echo agent with the shell tool, real
WebSocket clients. Ann's ``!sh rm -rf ./x`` runs on A (the only process then) and waits for
approval; B starts, Ann's chat connects there (its hello re-sends the open prompt from the
shared store) and she taps "once" through B. The answer is committed by B; A's waiting
turn is woken by the fleet's notice, runs the command in A's working directory (the
directory goes; B's has none) and answers once, through B, where Ann is connected now.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.postgres import DSN, pg_schema_fixture, sql  # noqa: F401  (the pg_schema fixture)
from support.procs import FrameClient, GatewayProcess

pytestmark = pytest.mark.slow


def _config(schema: str) -> dict[str, Any]:
    return {
        "store": {"url": DSN, "postgres": {"schema": schema}},
        "agent": {"echo": {"chunk_delay_ms": 0}},
        "tools": {"enabled": True},
        "shutdown": {"drain_seconds": 2},
    }


async def test_an_approval_answered_through_another_process_wakes_the_waiting_turn(
    tmp_path: Path, pg_schema: str
) -> None:
    fleet = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        fleet.append(GatewayProcess(tmp_path / name, _config(pg_schema)))
    a, b = fleet
    clients: list[FrameClient] = []
    try:
        await a.start()
        x = a.state_dir / "workdir" / "x"
        x.mkdir(parents=True)
        (x / "keep.txt").write_text("keep me")
        on_a = FrameClient(a.port, "chat-1", "ann", "Ann")
        clients.append(on_a)
        await on_a.connect()
        await on_a.message("m-1", "!sh rm -rf ./x")
        asked = await on_a.prompt()
        await b.start()  # the turn is A's: it leased the session before B existed
        await on_a.close()
        on_b = FrameClient(b.port, "chat-1", "ann", "Ann")
        clients.append(on_b)
        await on_b.connect()
        shown = await on_b.prompt()  # the open prompt, re-sent by B from the shared store
        assert shown["prompt_id"] == asked["prompt_id"]
        await on_b.tap(shown["prompt_id"], "once", "tap-1")
        resolved = await on_b.wait_for(lambda f: f["type"] == "prompt_resolved", what="the tap recorded")
        assert resolved["outcome"] == "approved"
        final = await on_b.final("m-1", timeout=60)
        assert final["text"].startswith("exit code 0"), final
        assert not x.exists(), "A ran the approved command, in its working directory"
        assert not (b.state_dir / "workdir" / "x").exists()
    finally:
        for client in clients:
            await client.close()
        for gateway in fleet:
            if gateway.proc is not None and gateway.proc.returncode is None:
                await gateway.terminate()
    turns = await sql(
        f"SELECT COUNT(*) AS n FROM \"{pg_schema}\".outbox WHERE kind = 'final' AND in_reply_to = 'm-1'"
    )
    assert turns[0]["n"] == 1, "answered once"
    (approval,) = await sql(f'SELECT state, answered_by_id FROM "{pg_schema}".approvals')
    assert (approval["state"], approval["answered_by_id"]) == ("approved", "ann")
    (item,) = await sql(f"SELECT status, attempts FROM \"{pg_schema}\".inbox WHERE delivery_id LIKE '%m-1'")
    assert (item["status"], item["attempts"]) == ("done", 1), "one turn ran it: A's, woken, not a retry"
