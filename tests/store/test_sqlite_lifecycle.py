"""Opening, migrating, configuring and closing the SQLite file."""

from __future__ import annotations

import sqlite3

import pytest

from chatgate.domain.errors import StoreUnavailable
from chatgate.store.sqlite import SqliteStore
from chatgate.store.sqlite.schema import SCHEMA_VERSION


async def test_fresh_file_is_migrated_to_the_current_schema_version(open_store, query, db_path):
    assert not db_path.exists()
    await open_store()
    assert query("PRAGMA user_version") == [(SCHEMA_VERSION,)]
    tables = {r[0] for r in query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"sessions", "inbox", "transcript", "outbox", "chat_labels"} <= tables


async def test_file_with_a_newer_schema_refuses_to_open_and_says_to_upgrade(db_path):
    db_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE future (x)")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    store = SqliteStore(db_path)
    with pytest.raises(StoreUnavailable, match="upgrade") as caught:
        await store.open()
    assert f"v{SCHEMA_VERSION + 1}" in str(caught.value)
    with pytest.raises(StoreUnavailable):
        await store.queue_depth()
    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION + 1,)
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'inbox'").fetchall() == []
    finally:
        conn.close()


async def test_reopening_a_current_file_keeps_its_data_and_version(open_store, make, query):
    store = await open_store()
    first = await store.admit(make.request("d1", "k1", "one"))
    await store.admit(make.request("d2", "k2", "two"))
    info = await store.session_info("k1")
    await store.close()

    again = await open_store()
    assert query("PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert await again.queue_depth() == 2
    assert await again.session_info("k1") == info
    duplicate = await again.admit(make.request("d1", "k1", "one"))
    assert (duplicate.new, duplicate.seq) == (False, first.seq)
    third = await again.admit(make.request("d3", "k1", "three"))
    assert third.new and third.seq > first.seq


async def test_unopenable_database_fails_open_with_store_unavailable(tmp_path):
    def refuse(path: str) -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    store = SqliteStore(tmp_path / "x.db", connect=refuse)
    with pytest.raises(StoreUnavailable, match="unable to open"):
        await store.open()


async def test_writer_connection_uses_wal_and_full_synchronous_by_default(open_store, connect_seam, query):
    store = await open_store(connect=connect_seam)
    await store.queue_depth()  # connects a reader
    writer = connect_seam.writer
    assert writer.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    # FULL, the default, in WAL mode: the connection runs at NORMAL and the writer fsyncs the WAL
    # after every durable batch itself (test_sqlite_durability.py sees each commit reach the disk).
    assert writer.execute("PRAGMA synchronous").fetchone() == (1,)
    assert query("PRAGMA journal_mode") == [("wal",)]  # persisted in the file
    readers = connect_seam.connections[1:]
    assert readers, "queue_depth() should have connected a reader"
    for reader in readers:
        assert reader.execute("PRAGMA synchronous").fetchone() == (2,)
        assert reader.execute("PRAGMA query_only").fetchone() == (1,)


@pytest.mark.parametrize(("setting", "expected"), [("OFF", 0), ("NORMAL", 1), ("EXTRA", 1)])
async def test_synchronous_setting_is_applied_to_the_writer(open_store, connect_seam, setting, expected):
    """OFF and NORMAL are SQLite's own; above NORMAL the writer fsyncs the WAL itself (as for FULL)."""
    await open_store(connect=connect_seam, synchronous=setting)
    assert connect_seam.writer.execute("PRAGMA synchronous").fetchone() == (expected,)


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.ping(),
        lambda s: s.queue_depth(),
        lambda s: s.session_info("k1"),
        lambda s: s.session_source("k1"),
        lambda s: s.history("x", 10),
        lambda s: s.list_sessions(),
        lambda s: s.unconfirmed_for_chat("webchat", "c1"),
        lambda s: s.chat_labels("webchat", None, "c1"),
        lambda s: s.claim_sessions("w", 1, 1.0, 1),
        lambda s: s.claim_outbox(1),
        lambda s: s.recover("w"),
    ],
    ids=[
        "ping",
        "queue_depth",
        "session_info",
        "session_source",
        "history",
        "list_sessions",
        "unconfirmed_for_chat",
        "chat_labels",
        "claim_sessions",
        "claim_outbox",
        "recover",
    ],
)
async def test_store_never_opened_raises_store_unavailable(tmp_path, call):
    store = SqliteStore(tmp_path / "never.db")
    with pytest.raises(StoreUnavailable):
        await call(store)
    assert not (tmp_path / "never.db").exists()


async def test_a_closed_store_object_that_opens_again_is_usable(open_store, make):
    store = await open_store()
    await store.admit(make.request("d1"))
    await store.close()
    try:
        await store.open()
    except StoreUnavailable:
        return  # refusing to reopen is an honest answer too
    assert await store.queue_depth() == 1
    assert (await store.admit(make.request("d2"))).new
