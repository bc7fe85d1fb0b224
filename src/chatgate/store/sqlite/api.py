"""The API's roles over SQLite: bearer keys (``api_keys``) and exchanges (inbox + outbox reads).

Key functions take a connection, so ``chatgate api-key`` can write through a connection
of its own beside a running gateway (a side store, ``SqliteStore.beside``), as pairing does.
"""

from __future__ import annotations

import sqlite3

from chatgate.domain.api_keys import ApiExchange, ApiKeyRecord
from chatgate.store import exchange_rules
from chatgate.store.exchange_rules import INBOX_ROW, ExchangeStatements
from chatgate.store.inline import run_inline
from chatgate.store.rows import API_KEY, Row, api_key_of
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads, writes


def create_api_key(conn: sqlite3.Connection, record: ApiKeyRecord, token_hash: str) -> None:
    conn.execute(
        "INSERT INTO api_keys (key_id, name, token_hash, created_at, revoked_at) VALUES (?,?,?,?,?)",
        (record.key_id, record.name, token_hash, record.created_at, record.revoked_at),
    )


def api_key_by_hash(conn: sqlite3.Connection, token_hash: str) -> ApiKeyRecord | None:
    row = conn.execute(f"SELECT {API_KEY} FROM api_keys WHERE token_hash = ?", (token_hash,)).fetchone()
    return api_key_of(row) if row else None


def list_api_keys(conn: sqlite3.Connection) -> list[ApiKeyRecord]:
    rows = conn.execute(f"SELECT {API_KEY} FROM api_keys ORDER BY created_at, key_id").fetchall()
    return [api_key_of(r) for r in rows]


def revoke_api_key(conn: sqlite3.Connection, key_id: str, now: float) -> bool:
    cur = conn.execute(
        "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL", (now, key_id)
    )
    return cur.rowcount > 0


class ExchangeSql(ExchangeStatements):
    """``ExchangeStatements`` on a reader's connection (each completes at once: see ``run_inline``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._c = conn

    async def inbox_row(self, transport: str, delivery_id: str) -> Row | None:
        sql = f"SELECT {INBOX_ROW} FROM inbox WHERE transport = ? AND delivery_id = ?"
        row: Row | None = self._c.execute(sql, (transport, delivery_id)).fetchone()
        return row

    async def final_parts(self, first: str) -> list[tuple[str, str]]:
        rows = self._c.execute(
            "SELECT text, target_json FROM outbox"
            " WHERE idem_key = ? OR (idem_key > ? AND idem_key < ?) ORDER BY id",
            (first, first + ":", first + ";"),
        ).fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]

    async def outbox_text(self, idem_key: str) -> str | None:
        row = self._c.execute("SELECT text FROM outbox WHERE idem_key = ?", (idem_key,)).fetchone()
        return None if row is None else str(row[0])


def api_exchange(conn: sqlite3.Connection, transport: str, delivery_id: str) -> ApiExchange | None:
    return run_inline(exchange_rules.api_exchange(ExchangeSql(conn), transport, delivery_id))


class SqliteApiKeys(SqliteRole):
    """``ApiKeys`` and ``Exchanges``."""

    create_api_key = writes(create_api_key)
    api_key_by_hash = reads(api_key_by_hash)
    list_api_keys = reads(list_api_keys)
    revoke_api_key = writes(revoke_api_key)
    api_exchange = reads(api_exchange)
