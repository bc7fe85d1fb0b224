"""The conversation search on SQLite reads a full-text index (FTS5) and a conversation's last
activity by an index, never by scanning every row (issue 27, finding 7); a database from before
the index (schema v11) is backfilled by the migration, so old conversations are found too."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from chatgate.store.sqlite.schema import MIGRATIONS, SCHEMA_VERSION, statements
from chatgate.store.sqlite.store import SqliteStore


def _at_v11(path: Path) -> None:
    conn = sqlite3.connect(path)
    for target in range(11):
        for statement in statements(MIGRATIONS[target]):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {target + 1}")
    with conn:
        conn.execute(
            "INSERT INTO web_chats (platform, chat_id, owner_id, title, created_at) VALUES"
            " ('web', 'old', 'ann', 'an old chat', 1.0), ('slack', 'C1', 'ann', NULL, 1.0)"
        )
        conn.execute(
            "INSERT INTO sessions (key, session_id, platform, chat_id, source_json, created_at,"
            " last_activity) VALUES ('k-old', 's-old', 'web', 'old', '{}', 1.0, 2.0)"
        )
        conn.execute(
            "INSERT INTO transcript (session_id, session_key, role, content, created_at) VALUES"
            " ('s-old', 'k-old', 'user', 'where is the quartz mine', 1.5),"
            " ('s-old', 'k-old', 'assistant', 'assistant words are not searched', 1.6)"
        )
        conn.execute(
            "INSERT INTO outbox (idem_key, platform, chat_id, session_key, kind, text, target_json, status,"
            " created_at) VALUES"
            " ('i1', 'web', 'old', 'k-old', 'final', 'the cobalt hills', '{}', 'confirmed', 1.7),"
            " ('i2', 'web', 'other', 'k-x', 'final', 'not a web chat of anyone', '{}', 'confirmed', 1.7)"
        )
    conn.close()


async def test_a_v11_database_is_migrated_and_its_old_conversations_are_found_by_their_words(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chatgate.db"
    _at_v11(path)
    store = SqliteStore(path)
    await store.open()
    try:
        assert [c.chat_id for c in await store.list_chats("web", "ann", "quartz", 10)] == ["old"]
        assert [c.chat_id for c in await store.list_chats("web", "ann", "cobalt", 10)] == ["old"]
        assert await store.list_chats("web", "ann", "assistant", 10) == []
        assert await store.list_chats("web", "ann", "anyone", 10) == []
    finally:
        await store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    rows = conn.execute("SELECT chat_id, body FROM chat_text ORDER BY body").fetchall()
    assert rows == [("old", "the cobalt hills"), ("old", "where is the quartz mine")]
    conn.close()


def test_the_search_and_the_list_use_their_indexes(tmp_path: Path) -> None:
    path = tmp_path / "chatgate.db"
    conn = sqlite3.connect(path)
    for target in range(SCHEMA_VERSION):
        for statement in statements(MIGRATIONS[target]):
            conn.execute(statement)
    from chatgate.store.sqlite.web_chats import _LIST, _MATCH

    plan = " | ".join(
        str(row[3])
        for row in conn.execute(
            "EXPLAIN QUERY PLAN " + _LIST.format(match=_MATCH), ("ann", "web", "%x%", '"x"*', "web", 10)
        )
    )
    assert "VIRTUAL TABLE INDEX" in plan, plan
    assert "sessions_chat" in plan, plan
    assert "SCAN outbox" not in plan and "SCAN transcript" not in plan, plan
    conn.close()


def test_a_trigger_body_is_one_statement() -> None:
    script = "CREATE TABLE t (a);\nCREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1; SELECT 2; END;\n"
    assert statements(script) == [
        "CREATE TABLE t (a);",
        "CREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1; SELECT 2; END;",
    ]
