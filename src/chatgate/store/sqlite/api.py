"""The API's roles over SQLite: bearer keys (``api_keys``) and exchanges (inbox + outbox reads).

Key functions take a connection, so ``chatgate api-key`` can write through a connection
of its own beside a running gateway (a side store, ``SqliteStore.beside``), as pairing does.
"""

from __future__ import annotations

import json
import sqlite3

from chatgate.domain.api_keys import ApiExchange, ApiKeyRecord
from chatgate.store.rows import API_KEY, api_key_of
from chatgate.store.sqlite.database import SqliteRole, reads, writes


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


def _answer(conn: sqlite3.Connection, seq: int, transport: str, delivery_id: str) -> str | None:
    """The final's parts joined (``final:<seq>``, ``final:<seq>:<i>``), else a command's reply."""
    first = f"final:{seq}"
    rows = conn.execute(
        "SELECT text FROM outbox WHERE idem_key = ? OR (idem_key > ? AND idem_key < ?) ORDER BY id",
        (first, first + ":", first + ";"),
    ).fetchall()
    if rows:
        return "".join(str(r[0]) for r in rows)
    row = conn.execute(
        "SELECT text FROM outbox WHERE idem_key = ?", (f"cmd:{transport}:{delivery_id}",)
    ).fetchone()
    return None if row is None else str(row[0])


def api_exchange(conn: sqlite3.Connection, transport: str, delivery_id: str) -> ApiExchange | None:
    row = conn.execute(
        "SELECT seq, session_key, inbound_json, status, outcome, admitted_at FROM inbox"
        " WHERE transport = ? AND delivery_id = ?",
        (transport, delivery_id),
    ).fetchone()
    if row is None:
        return None
    seq = int(row[0])
    return ApiExchange(
        seq=seq,
        session_key=str(row[1]),
        inbound_json=json.loads(row[2]),
        status=str(row[3]),
        outcome=None if row[4] is None else str(row[4]),
        admitted_at=float(row[5]),
        answer=_answer(conn, seq, transport, delivery_id),
    )


class SqliteApiKeys(SqliteRole):
    """``ApiKeys`` and ``Exchanges``."""

    create_api_key = writes(create_api_key)
    api_key_by_hash = reads(api_key_by_hash)
    list_api_keys = reads(list_api_keys)
    revoke_api_key = writes(revoke_api_key)
    api_exchange = reads(api_exchange)
