"""A storm of cut database connections under load: no chat stalls and no user is told "the
gateway restarted".

Two gateway processes on one PostgreSQL schema while web chat clients spread over both ports
keep writing; every database connection of the fleet (pools and liveness connections) is cut
with ``pg_terminate_backend`` several times, a second or two apart. No process died, so:
every message is answered once and in the order the fleet admitted it, no resume notice is
recorded, and the last reply arrives long before an outbox lease (300 s) could have run out
for a claim left in doubt by a cut. Scaled for CI; the acceptance run (1,500 messages, 10
cuts) is ``STORM_CHATS=50 STORM_PER_CHAT=30 STORM_CUTS=10``.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path

import pytest

from support.postgres import DSN, pg_schema_fixture, sql  # noqa: F401  (the pg_schema fixture)
from support.procs import admitted_order, fleet_clients, start_fleet, stop_fleet, wait_until

PROCESSES = 2
CHATS = int(os.environ.get("STORM_CHATS", "16"))
PER_CHAT = int(os.environ.get("STORM_PER_CHAT", "20"))
CUTS = int(os.environ.get("STORM_CUTS", "5"))
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
SETTLED_WITHIN = 150.0
"""Seconds after the last cut by which every reply must be in: half the outbox lease (300 s),
so a reply whose claim was left in doubt and waited for its lease would miss it."""


async def cut_database_connections(schema: str) -> int:
    rows = await sql(
        "SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a"
        f" JOIN \"{schema}\".processes p ON a.application_name = 'chatgate ' || p.holder"
    )
    return len(rows)


async def test_a_storm_of_cut_connections_stalls_no_chat_and_tells_no_one_of_a_restart(
    tmp_path: Path, pg_schema: str
) -> None:
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    config = {
        "store": {"url": DSN, "postgres": {"schema": pg_schema, "pool_size": 4}},
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

    cut = 0
    try:
        await wait_until(lambda: answered() >= total // 10, 120, f"a tenth answered (seed {seed})")
        for _ in range(CUTS):
            cut += await cut_database_connections(pg_schema)
            await asyncio.sleep(rng.uniform(0.5, 2.0))
        last_cut = time.monotonic()
        await wait_until(
            lambda: all(c.done for c in clients), SETTLED_WITHIN, f"every message answered (seed {seed})"
        )
        settled = time.monotonic() - last_cut
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await stop_fleet(fleet)

    print(f"storm: {CUTS} cuts ({cut} connections), all {total} answered {settled:.1f}s after the last")
    assert cut >= CUTS * PROCESSES, "each cut reached every process's connections"
    assert [g.proc.pid for g in fleet if g.proc is not None] == pids, "none was restarted"
    for client in clients:
        assert {e["code"] for e in client.errors} <= {"storage_unavailable"}, client.errors
        for mid, text in client.messages:
            assert set(client.finals[mid]) == {(client.finals[mid][0][0], f"echo: {text}")}, (mid, seed)
    rows = await sql(f'SELECT delivery_id FROM "{pg_schema}".inbox ORDER BY seq')
    admitted = admitted_order(r["delivery_id"] for r in rows)
    for client in clients:
        assert client.first_final_order == admitted[client.chat_id], (client.chat_id, seed)
    notices = await sql(f"SELECT in_reply_to, text FROM \"{pg_schema}\".outbox WHERE kind = 'notice'")
    assert [dict(r) for r in notices] == [], "no process died: nobody is told the gateway restarted"
    (finals,) = await sql(
        "SELECT COUNT(*) AS n, COUNT(DISTINCT in_reply_to) AS d"
        f" FROM \"{pg_schema}\".outbox WHERE kind = 'final'"
    )
    assert (finals["n"], finals["d"]) == (total, total)
