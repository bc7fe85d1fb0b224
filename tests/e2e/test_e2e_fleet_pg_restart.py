"""The fleet's database restarted under load: a private PostgreSQL server, stopped and started.

Two gateway processes share a PostgreSQL server of the test's own (``support.pg_cluster``:
the machine's shared one serves other tests) while web chat clients spread over both ports
keep writing. The server is stopped (fast shutdown: every connection cut) for a few
seconds and started again. While it is down, a message gets the documented
``storage_unavailable`` error and no ack (the client sends it again later); afterwards both
processes recover on their own, without a restart, and every message is answered exactly
once, in the order the fleet admitted it; everything acknowledged is in the inbox.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import asyncpg
import pytest

from support.pg_cluster import PrivateCluster, private_pg_fixture  # noqa: F401  (the private_pg fixture)
from support.procs import admitted_order, fleet_clients, start_fleet, stop_fleet, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]
PROCESSES = 2
CHATS = int(os.environ.get("RESTART_CHATS", "12"))
PER_CHAT = int(os.environ.get("RESTART_PER_CHAT", "30"))
"""Scaled for CI; the acceptance run (1,500 messages) is ``RESTART_CHATS=50 RESTART_PER_CHAT=30``."""
DOWN_SECONDS = 4.0
SCHEMA = "fleet"


async def _fetch(dsn: str, query: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        return await conn.fetch(query)
    finally:
        await conn.close()


async def test_a_fleet_rides_out_its_database_restarting_under_load(
    tmp_path: Path, private_pg: PrivateCluster
) -> None:
    config = {
        "store": {"url": private_pg.dsn, "postgres": {"schema": SCHEMA, "pool_size": 4}},
        "agent": {"echo": {"chunk_delay_ms": 5, "chunk_chars": 8}},
        "shutdown": {"drain_seconds": 1},
    }
    fleet = await start_fleet(tmp_path, config, PROCESSES)
    pids = [g.proc.pid for g in fleet if g.proc is not None]
    clients = fleet_clients(fleet, CHATS, PER_CHAT)
    stop = asyncio.Event()
    tasks = [asyncio.create_task(client.run(stop)) for client in clients]
    total = CHATS * PER_CHAT

    def answered() -> int:
        return sum(len(c.finals) for c in clients)

    def refused() -> int:
        return sum(len(c.errors) for c in clients)

    try:
        await wait_until(lambda: answered() >= total // 5, 120, "a fifth of the messages answered")
        await private_pg.stop("fast")
        down_at = time.monotonic()
        await wait_until(lambda: refused() > 0, 30, "a message refused while the database is down")
        await asyncio.sleep(max(0.0, DOWN_SECONDS - (time.monotonic() - down_at)))  # down for a while
        up_at = time.monotonic()
        answered_while_down = answered()
        await private_pg.start()
        await wait_until(
            lambda: all(c.done for c in clients), 240, "every message answered after the restart"
        )
        print(f"restart: all {total} answered {time.monotonic() - up_at:.1f}s after the server was back")
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        running = [g.proc is not None and g.proc.returncode is None for g in fleet]
        await stop_fleet(fleet)

    assert all(running), "every process rode the outage out: none exited"
    assert [g.proc.pid for g in fleet if g.proc is not None] == pids, "none was restarted"
    assert answered() > answered_while_down
    for client in clients:
        assert {e["code"] for e in client.errors} <= {"storage_unavailable"}, client.errors
        # Nothing acknowledged while the server was down (a second of grace for an ack of a
        # commit that made it before the shutdown and was still on its way).
        assert not [m for m, t in client.acked_at.items() if down_at + 1.0 < t < up_at], client.chat_id
        for mid, text in client.messages:
            assert set(client.finals[mid]) == {(client.finals[mid][0][0], f"echo: {text}")}, mid
    rows = await _fetch(private_pg.dsn, f'SELECT delivery_id, status FROM "{SCHEMA}".inbox ORDER BY seq')
    assert len(rows) == total and {r["status"] for r in rows} == {"done"}, "each admitted once, all done"
    admitted = admitted_order(r["delivery_id"] for r in rows)
    for client in clients:
        assert client.acked <= set(admitted[client.chat_id]), "everything acknowledged was kept"
        assert client.first_final_order == admitted[client.chat_id], client.chat_id
    (finals,) = await _fetch(
        private_pg.dsn,
        "SELECT COUNT(*) AS n, COUNT(DISTINCT in_reply_to) AS d"
        f" FROM \"{SCHEMA}\".outbox WHERE kind = 'final'",
    )
    assert (finals["n"], finals["d"]) == (total, total)
    # Only the database restarted: no process died, so no user is told "the gateway restarted"
    # (a turn the outage interrupted is given back, and runs again as a first attempt).
    notices = await _fetch(
        private_pg.dsn, f"SELECT in_reply_to, text FROM \"{SCHEMA}\".outbox WHERE kind = 'notice'"
    )
    assert [dict(r) for r in notices] == []
