"""A state directory whose database was lost refuses to start empty, and says how to proceed.

Real ``chatgate run`` processes on a real state directory that a first run filled with
acknowledged messages; the database is then deleted, emptied or cut short by hand.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from support.procs import FrameClient, GatewayProcess

pytestmark = pytest.mark.slow

CONFIG = {"agent": {"echo": {"chunk_delay_ms": 0}}}
EX_CONFIG = 78


async def _filled_state(tmp: Path) -> GatewayProcess:
    """A state directory holding answered messages, left by a cleanly stopped gateway."""
    gateway = GatewayProcess(tmp, CONFIG)
    await gateway.start()
    client = FrameClient(gateway.port, "chat-1", "u1")
    await client.connect()
    for i in range(20):
        await client.message(f"m{i}", f"message {i} " + "x" * 200)
        await client.final(f"m{i}")
    await client.close()
    assert await gateway.terminate() == 0
    return gateway


async def _run_once(gateway: GatewayProcess, *extra: str) -> tuple[int, str]:
    """Start ``chatgate run`` and wait for it to exit by itself; its code and its output."""
    await gateway.start(*extra, wait=False)
    assert gateway.proc is not None
    try:
        code = await asyncio.wait_for(gateway.proc.wait(), 60)
    except TimeoutError:
        await gateway.kill()
        raise AssertionError(f"the gateway started on a lost database: {gateway.logs()}") from None
    return code, (gateway.tmp / f"gateway-{gateway.starts}.log").read_text()


def _apply(damage: Callable[[Path], None], db: Path) -> None:
    assert not Path(f"{db}-wal").exists(), "a clean stop checkpoints the WAL into the file"
    damage(db)


def _delete(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def _empty(db: Path) -> None:
    _delete(db)
    db.write_bytes(b"")


def _cut_short(db: Path) -> None:
    data = db.read_bytes()
    _delete(db)
    db.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize(
    ("damage", "what"),
    [(_delete, "is missing"), (_empty, "is empty"), (_cut_short, "is truncated")],
    ids=["deleted", "zero-bytes", "partial"],
)
async def test_a_lost_database_stops_the_start_with_exit_78_naming_the_file_and_the_way_on(
    tmp_path: Path, damage: Callable[[Path], None], what: str
) -> None:
    gateway = await _filled_state(tmp_path)
    db = gateway.state_dir / "chatgate.db"
    await asyncio.to_thread(_apply, damage, db)

    code, output = await _run_once(gateway)
    assert code == EX_CONFIG, output
    assert f"{db} {what}" in output, output
    assert "--reset-state" in output and "Traceback" not in output, output

    # On purpose: the remains are set aside, not deleted, and the gateway starts empty.
    await gateway.start("--reset-state")
    try:
        set_aside = sorted(p.name for p in gateway.state_dir.glob("chatgate.db*.damaged-*"))
        assert any(name.startswith("chatgate.db.identity.damaged-") for name in set_aside), set_aside
        client = FrameClient(gateway.port, "chat-1", "u1")
        await client.connect()
        await client.message("after", "hello again")
        await client.final("after")
        await client.close()
    finally:
        await gateway.kill()


async def test_a_fresh_state_dir_starts_and_a_healthy_one_survives_reset_state(tmp_path: Path) -> None:
    gateway = await _filled_state(tmp_path)  # a fresh state dir starts fine
    db = gateway.state_dir / "chatgate.db"
    await gateway.start("--reset-state")
    try:
        client = FrameClient(gateway.port, "chat-1", "u1")
        await client.connect()
        await client.message("again", "one more")
        await client.final("again")
        await client.close()
    finally:
        await gateway.kill()
    assert not list(gateway.state_dir.glob("*.damaged-*"))
    conn = sqlite3.connect(db)
    try:
        kept = conn.execute("SELECT COUNT(*) FROM inbox WHERE status = 'done'").fetchone()[0]
    finally:
        conn.close()
    assert kept == 21, "--reset-state must never touch a healthy database"
