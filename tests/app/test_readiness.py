"""/readyz of a real gateway process says whether a write can commit now, not only whether the lock is free.

A full disk and a damaged page both let ``BEGIN IMMEDIATE`` through; readiness must see them.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

import httpx

from support.procs import FrameClient, GatewayProcess
from support.smallfs import disk_hog, small_fs

CONFIG = {"agent": {"echo": {"chunk_delay_ms": 0}}}


async def _readyz_until(port: int, status: int, timeout: float = 30.0) -> httpx.Response:
    """Ask until /readyz answers ``status`` (a probe's answer is reused for about a second)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
        while True:
            response = await http.get("/readyz")
            if response.status_code == status or loop.time() > deadline:
                assert response.status_code == status, response.text
                return response
            await asyncio.sleep(0.2)


async def test_readyz_is_503_with_the_reason_while_the_disk_is_full_and_200_once_space_returns(
    tmp_path: Path,
) -> None:
    with small_fs(tmp_path / "disk") as disk:
        gateway = GatewayProcess(disk, CONFIG)
        await gateway.start()
        try:
            await _readyz_until(gateway.port, 200)
            async with disk_hog(disk / "ballast"):
                full = await _readyz_until(gateway.port, 503)
                reasons = full.json()["reasons"]
                assert any(r.startswith("store:") and "full" in r for r in reasons), reasons
            await _readyz_until(gateway.port, 200)
        finally:
            await gateway.kill()


def _transcript_root(db: Path) -> tuple[int, int]:
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'transcript'").fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return int(root), int(page_size)


async def test_readyz_is_503_naming_the_damage_for_a_database_with_a_corrupt_page(tmp_path: Path) -> None:
    # A real database with some history in it, made by a real gateway.
    (tmp_path / "a").mkdir()
    first = GatewayProcess(tmp_path / "a", CONFIG)
    await first.start()
    client = FrameClient(first.port, "chat-1", "u1")
    await client.connect()
    for i in range(40):
        await client.message(f"m{i}", f"message {i} " + "x" * 300)
        await client.final(f"m{i}")
    await client.close()
    assert await first.terminate() == 0
    # A copy of it with one page of the transcript overwritten.
    copy_dir = tmp_path / "b" / "state"
    copy_dir.mkdir(parents=True)
    copy = copy_dir / "chatgate.db"
    shutil.copyfile(first.state_dir / "chatgate.db", copy)
    root, page_size = _transcript_root(copy)
    with copy.open("r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\xde\xad\xbe\xef" * (page_size // 4))

    second = GatewayProcess(tmp_path / "b", CONFIG)
    await second.start()
    try:
        damaged = await _readyz_until(second.port, 503)
        reasons = damaged.json()["reasons"]
        assert any("chatgate.db is damaged" in r for r in reasons), reasons
    finally:
        await second.kill()
