"""The rejected log is bounded: a stranger whose every message is refused cannot fill the disk."""

from __future__ import annotations

import asyncio
from pathlib import Path

from chatgate.store.sqlite import SqliteStore
from chatgate.store.sqlite.inbox import REJECTED_KEPT
from support.engine_harness import read_db


async def test_the_rejected_log_keeps_only_the_newest_entries(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "chatgate.db")
    await store.open()
    try:
        extra = 25
        await asyncio.gather(  # concurrent writes share group commits
            *(
                store.record_rejected("web", f"d{i}", "unauthorized: not on the allowlist", "x")
                for i in range(REJECTED_KEPT + extra)
            )
        )
        newest = await store.rejected(limit=3)
    finally:
        await store.close()
    [(count,)] = read_db(tmp_path / "chatgate.db", "SELECT COUNT(*) FROM rejected_inbound")
    assert count == REJECTED_KEPT
    ids = {row[0] for row in read_db(tmp_path / "chatgate.db", "SELECT delivery_id FROM rejected_inbound")}
    assert f"d{extra - 1}" not in ids and f"d{extra}" in ids  # the oldest went, in order
    assert [r.delivery_id for r in newest] == [f"d{REJECTED_KEPT + extra - 1 - i}" for i in range(3)]
