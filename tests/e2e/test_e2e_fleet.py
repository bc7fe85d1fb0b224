"""A fleet: three gateway processes on one PostgreSQL schema, one SIGKILLed at random and
restarted again and again, while web chat clients spread over the three ports keep writing;
once, every database connection of the fleet is cut (``pg_terminate_backend``) under load;
and again on a server of the test's own that is restarted twice meanwhile.

Every message is answered exactly once and in order per chat, the store agrees, and no two
turns of one session ever overlapped (the recording agent journals each turn's start and
end with its pid; a killed process's unfinished turn ends at its kill). Scaled for CI; the
acceptance run (10,000 messages over 100 chats, 30 kills, 2 restarts) is ``FLEET_CHATS=100
FLEET_PER_CHAT=100 FLEET_KILLS=30 FLEET_DB_RESTARTS=2``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from support.pg_cluster import PrivateCluster, private_pg_fixture  # noqa: F401  (the private_pg fixture)
from support.postgres import DSN, pg_schema_fixture, sql  # noqa: F401  (the pg_schema fixture)
from support.procs import ChatClient, GatewayProcess, admitted_order, wait_until
from support.recording_agent import read_journal

PROCESSES = 3
CHATS = int(os.environ.get("FLEET_CHATS", "30"))
PER_CHAT = int(os.environ.get("FLEET_PER_CHAT", "10"))
KILLS = int(os.environ.get("FLEET_KILLS", "5"))
DB_RESTARTS = int(os.environ.get("FLEET_DB_RESTARTS", "2"))
pytestmark = [pytest.mark.slow, pytest.mark.timeout(max(600, CHATS * PER_CHAT // 5 + 30 * KILLS))]
LAUNCHER = [sys.executable, str(Path(__file__).parents[1] / "support" / "recording_agent.py")]


def _troubles(fleet: list[GatewayProcess]) -> str:
    """The warnings and errors each process logged, for a failure that one process ran no turn."""
    lines = []
    for i, gateway in enumerate(fleet):
        for log in sorted(gateway.tmp.glob("gateway-*.log")):
            found = [
                x for x in log.read_text(errors="replace").splitlines() if "WARNING" in x or "ERROR" in x
            ]
            lines += [f"p{i} {log.name}: {x[:300]}" for x in found[-15:]]
    return "\n".join(lines)


def overlaps(journal: list[dict[str, object]], ended_at: dict[int, float]) -> list[str]:
    """Pairs of turns of one session whose [start, end] intervals intersect."""
    open_turns: dict[tuple[int, str], float] = {}
    intervals: dict[str, list[tuple[float, float, int]]] = {}
    for entry in journal:
        pid, key, t = int(entry["pid"]), str(entry["key"]), float(entry["t"])  # type: ignore[arg-type]
        if entry["ev"] == "start":
            assert (pid, key) not in open_turns, f"{pid} started {key} twice at once"
            open_turns[(pid, key)] = t
        else:
            intervals.setdefault(key, []).append((open_turns.pop((pid, key)), t, pid))
    for (pid, key), start in open_turns.items():  # the process was killed (or stopped) mid-turn
        intervals.setdefault(key, []).append((start, ended_at[pid], -pid))
    found = []
    for key, spans in intervals.items():
        spans.sort()
        for (s1, e1, p1), (s2, _, p2) in itertools.pairwise(spans):
            if s2 < e1:
                killed = " (killed then)" if p1 < 0 else ""
                found.append(
                    f"{key}: pid {abs(p1)} [{s1:.3f}, {e1:.3f}]{killed} and pid {abs(p2)} from {s2:.3f}"
                )
    return found


async def cut_database_connections(schema: str) -> int:
    """The database side of an outage: ``pg_terminate_backend`` on every connection of the fleet."""
    rows = await sql(
        "SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a"
        f" JOIN \"{schema}\".processes p ON a.application_name = 'chatgate ' || p.holder"
    )
    return len(rows)


def test_the_overlap_checker_sees_two_turns_of_one_session_at_once_and_a_killed_turn() -> None:
    def turn(ev: str, pid: int, key: str, t: float) -> dict[str, object]:
        return {"ev": ev, "pid": pid, "key": key, "t": t}

    apart = [turn("start", 1, "k", 0.0), turn("end", 1, "k", 1.0), turn("start", 2, "k", 1.5)]
    assert overlaps([*apart, turn("end", 2, "k", 2.0)], {}) == []
    both = [turn("start", 1, "k", 0.0), turn("start", 2, "k", 0.5), turn("end", 2, "k", 0.7)]
    assert len(overlaps([*both, turn("end", 1, "k", 1.0)], {})) == 1
    killed = [turn("start", 1, "k", 0.0), turn("start", 2, "k", 0.5), turn("end", 2, "k", 0.7)]
    assert len(overlaps(killed, {1: 0.6})) == 1, "pid 1 was killed only at 0.6: its turn ran until then"
    assert overlaps(killed, {1: 0.4}) == []


Query = Callable[..., Awaitable[list[Any]]]
Outage = Callable[[], Awaitable[None]]


async def test_a_fleet_with_one_process_killed_at_random_answers_everything_once_in_order(
    tmp_path: Path, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def cut() -> None:
        killed = await cut_database_connections(pg_schema)
        assert killed >= PROCESSES, "each process lost its pool and its liveness connection"

    await chaos(tmp_path, monkeypatch, DSN, pg_schema, sql, [cut])


async def test_a_fleet_killed_at_random_through_database_restarts_answers_everything_once_in_order(
    tmp_path: Path, private_pg: PrivateCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same, on a server of the test's own that is restarted (fast shutdown, a few seconds
    down) ``FLEET_DB_RESTARTS`` times (2 by default) while the kills go on."""

    async def query(text: str, *args: object) -> list[Any]:
        conn = await asyncpg.connect(private_pg.dsn, timeout=10)
        try:
            return list(await conn.fetch(text, *args))
        finally:
            await conn.close()

    async def restart() -> None:
        await private_pg.stop("fast")
        await asyncio.sleep(3.0)
        await private_pg.start()

    await chaos(tmp_path, monkeypatch, private_pg.dsn, "fleet", query, [restart] * DB_RESTARTS)


async def chaos(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dsn: str,
    pg_schema: str,
    sql: Query,
    outages: list[Outage],
) -> None:
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    journal = tmp_path / "turns.jsonl"
    monkeypatch.setenv("TURN_JOURNAL", str(journal))
    config = {
        "store": {"url": dsn, "postgres": {"schema": pg_schema, "pool_size": 4}},
        "agent": {"echo": {"chunk_delay_ms": 3, "chunk_chars": 8}},
        "shutdown": {"drain_seconds": 1},
    }
    for i in range(PROCESSES):
        (tmp_path / f"p{i}").mkdir()
    fleet = [GatewayProcess(tmp_path / f"p{i}", config) for i in range(PROCESSES)]
    await asyncio.gather(*(g.start(launcher=LAUNCHER) for g in fleet))
    ended_at: dict[int, float] = {}
    clients = [
        ChatClient(
            f"ws://127.0.0.1:{fleet[c % PROCESSES].port}/ws",
            f"chat{c}",
            [(f"c{c}m{i}", f"message {i} of chat {c} (seed {seed})") for i in range(PER_CHAT)],
        )
        for c in range(CHATS)
    ]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(client.run(stop)) for client in clients]
    total = CHATS * PER_CHAT

    def answered() -> int:
        return sum(len(c.finals) for c in clients)

    thresholds = sorted(rng.sample(range(total // 20, total * 9 // 10), KILLS))
    outages_at = sorted(rng.sample(range(total // 10, total * 8 // 10), len(outages)))
    events: list[tuple[int, Outage | None]] = [(t, None) for t in thresholds]
    events += list(zip(outages_at, outages, strict=True))
    victims: list[int] = []
    try:
        for threshold, outage in sorted(events, key=lambda e: e[0]):
            await wait_until(lambda t=threshold: answered() >= t, 180, f"{threshold} answers (seed {seed})")
            if outage is not None:
                await outage()
                continue
            await asyncio.sleep(rng.uniform(0, 0.05))
            victim = rng.randrange(PROCESSES)
            victims.append(victim)
            assert fleet[victim].proc is not None
            pid = fleet[victim].proc.pid
            # Its turns end at the kill: a successor can only start once the process is dead, so
            # one that started before the signal was even sent ran beside it.
            ended_at[pid] = time.time()
            await fleet[victim].kill()
            await fleet[victim].start(launcher=LAUNCHER)
        await wait_until(lambda: all(c.done for c in clients), 180, f"every message answered (seed {seed})")
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for gateway in fleet:  # every one is stopped, whatever failed above
            if gateway.proc is None or gateway.proc.returncode is not None:
                continue
            ended_at[gateway.proc.pid] = time.time()
            try:
                await gateway.terminate()
            except Exception:  # it did not stop in time: it must not outlive the test
                await gateway.kill()

    context = f"seed={seed} victims={victims} thresholds={thresholds}"
    for client in clients:
        # the outage refuses what it cannot record, cleanly (the client sends it again); nothing else
        assert {e["code"] for e in client.errors} <= {"storage_unavailable"}, (client.chat_id, context)
        for mid, text in client.messages:
            assert set(client.finals[mid]) == {(client.finals[mid][0][0], f"echo: {text}")}, (mid, context)
    # In order: the order the fleet admitted them (a message the outage refused was sent again
    # after later ones got in, and is answered after them, as the client's resend asked).
    rows = await sql(f'SELECT delivery_id FROM "{pg_schema}".inbox ORDER BY seq')
    admitted = admitted_order(r["delivery_id"] for r in rows)
    for client in clients:
        assert client.first_final_order == admitted[client.chat_id], (client.chat_id, context)
        if not client.errors:  # nothing refused: admitted, and so answered, in the order sent
            assert admitted[client.chat_id] == [mid for mid, _ in client.messages], (client.chat_id, context)
    inbox = await sql(f'SELECT status, COUNT(*) AS n FROM "{pg_schema}".inbox GROUP BY status')
    assert [(r["status"], r["n"]) for r in inbox] == [("done", total)], context
    (finals,) = await sql(
        "SELECT COUNT(*) AS n, COUNT(DISTINCT in_reply_to) AS d"
        f" FROM \"{pg_schema}\".outbox WHERE kind = 'final'"
    )
    assert (finals["n"], finals["d"]) == (total, total), context
    turns = read_journal(str(journal))
    ran = Counter(int(e["pid"]) for e in turns if e["ev"] == "start")  # type: ignore[call-overload]
    assert len(ran) >= PROCESSES, (
        f"every process ran turns: {sorted(ran.items())} {context}\n{_troubles(fleet)}"
    )
    assert overlaps(turns, ended_at) == [], context
