"""The API's roles over PostgreSQL: bearer keys (``api_keys``) and exchanges (inbox + outbox reads).

As on SQLite, an exchange is read from the inbox row of the request's delivery and the
outbox rows its turn (or its control command) recorded; nothing of its own is stored.
"""

from __future__ import annotations

import json

import asyncpg

from chatgate.domain.api_keys import ApiExchange, ApiKeyRecord
from chatgate.store.postgres.database import PgRole, reads, writes
from chatgate.store.postgres.sql import rowcount
from chatgate.store.rows import API_KEY, api_key_of


async def create_api_key(conn: asyncpg.Connection, record: ApiKeyRecord, token_hash: str) -> None:
    await conn.execute(
        "INSERT INTO api_keys (key_id, name, token_hash, created_at, revoked_at) VALUES ($1,$2,$3,$4,$5)",
        record.key_id,
        record.name,
        token_hash,
        record.created_at,
        record.revoked_at,
    )


async def api_key_by_hash(conn: asyncpg.Connection, token_hash: str) -> ApiKeyRecord | None:
    row = await conn.fetchrow(f"SELECT {API_KEY} FROM api_keys WHERE token_hash = $1", token_hash)
    return None if row is None else api_key_of(row)


async def list_api_keys(conn: asyncpg.Connection) -> list[ApiKeyRecord]:
    rows = await conn.fetch(f"SELECT {API_KEY} FROM api_keys ORDER BY created_at, key_id")
    return [api_key_of(r) for r in rows]


async def revoke_api_key(conn: asyncpg.Connection, key_id: str, now: float) -> bool:
    status = await conn.execute(
        "UPDATE api_keys SET revoked_at = $1 WHERE key_id = $2 AND revoked_at IS NULL", now, key_id
    )
    return rowcount(status) > 0


async def _answer(conn: asyncpg.Connection, seq: int, transport: str, delivery_id: str) -> str | None:
    """The final's parts joined (``final:<seq>``, ``final:<seq>:<i>``), else a command's reply."""
    first = f"final:{seq}"
    rows = await conn.fetch(
        # The parts' range under the C collation (a database's own may not order ':' before ';'),
        # which the ``outbox_idem_bytes`` index serves.
        "SELECT text FROM outbox WHERE idem_key = $1"
        ' OR (idem_key COLLATE "C" > $2 AND idem_key COLLATE "C" < $3) ORDER BY id',
        first,
        first + ":",
        first + ";",
    )
    if rows:
        return "".join(str(r[0]) for r in rows)
    reply = f"cmd:{transport}:{delivery_id}"
    text = await conn.fetchval("SELECT text FROM outbox WHERE idem_key = $1", reply)
    return None if text is None else str(text)


async def api_exchange(conn: asyncpg.Connection, transport: str, delivery_id: str) -> ApiExchange | None:
    row = await conn.fetchrow(
        "SELECT seq, session_key, inbound_json, status, outcome, admitted_at FROM inbox"
        " WHERE transport = $1 AND delivery_id = $2",
        transport,
        delivery_id,
    )
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
        answer=await _answer(conn, seq, transport, delivery_id),
    )


class PgApiKeys(PgRole):
    """``ApiKeys`` and ``Exchanges``."""

    create_api_key = writes(create_api_key)
    api_key_by_hash = reads(api_key_by_hash)
    list_api_keys = reads(list_api_keys)
    revoke_api_key = writes(revoke_api_key)
    api_exchange = reads(api_exchange)
