"""One store per database file; the CLI's side store reads and writes it without becoming a second owner."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

import pytest

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.inbound import Inbound
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.source import Source
from chatgate.store.sqlite import SqliteStore
from chatgate.store.sqlite.schema import SCHEMA_VERSION


def _request(delivery: str) -> AdmitRequest:
    source = Source(platform="web", chat_id="c1", user_id="u1")
    return AdmitRequest(Inbound("web", delivery, source, "hi"), "agent:main:web:dm:c1")


async def test_a_second_store_on_the_same_file_is_refused_until_the_first_closes(tmp_path: Path) -> None:
    first = SqliteStore(tmp_path / "db.sqlite")
    await first.open()
    second = SqliteStore(tmp_path / "db.sqlite")
    with pytest.raises(StoreUnavailable, match="already open in another chatgate process"):
        await second.open()
    await first.close()
    third = SqliteStore(tmp_path / "db.sqlite")
    await third.open()
    await third.close()


async def test_another_process_cannot_open_the_file_while_a_store_holds_it(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = SqliteStore(path)
    await store.open()
    try:
        script = (
            "import asyncio, sys; from chatgate.store.sqlite import SqliteStore; "
            "from chatgate.domain.errors import StoreUnavailable\n"
            "async def main():\n"
            f"    try: await SqliteStore({str(path)!r}).open()\n"
            "    except StoreUnavailable: sys.exit(7)\n"
            "asyncio.run(main())"
        )
        child = await asyncio.create_subprocess_exec(sys.executable, "-c", script)
        assert await child.wait() == 7
    finally:
        await store.close()


async def test_a_side_store_reads_beside_a_running_store_and_the_owner_keeps_writing(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = SqliteStore(path)
    await store.open()
    try:
        await store.admit(_request("d1"))
        side = SqliteStore(path, side=True)
        await side.open()
        try:
            sessions = await side.list_sessions(10)
        finally:
            await side.close()
        assert [s.session_key for s in sessions] == ["agent:main:web:dm:c1"]
        assert (await store.admit(_request("d2"))).new, "the owner keeps writing"
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("offset", "says"), [(-1, "Start the gateway of chatgate"), (5, "newer than chatgate")]
)
async def test_a_side_store_refuses_a_database_of_another_schema_version_and_migrates_nothing(
    tmp_path: Path, offset: int, says: str
) -> None:
    path = tmp_path / "db.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + offset}")
    conn.close()
    with pytest.raises(StoreUnavailable, match=f"schema v{SCHEMA_VERSION + offset}.*{says}"):
        await SqliteStore(path, side=True).open()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + offset
    assert conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0, "no table was created"
    conn.close()


async def test_a_side_store_never_creates_a_missing_database(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="cannot open"):
        await SqliteStore(tmp_path / "absent.db", side=True).open()
    assert not (tmp_path / "absent.db").exists()
