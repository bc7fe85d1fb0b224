"""The API's roles over PostgreSQL: bearer keys (``api_keys``) and exchanges (inbox + outbox reads).

As on SQLite, an exchange is read from the inbox row of the request's delivery and the
outbox rows its turn (or its control command) recorded; nothing of its own is stored.
"""

from __future__ import annotations

import asyncpg

from chatgate.domain.api_keys import ApiExchange, ApiKeyRecord
from chatgate.store import exchange_rules
from chatgate.store.exchange_rules import INBOX_ROW, ExchangeStatements
from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.forwards import reads, writes
from chatgate.store.postgres.sql import rowcount
from chatgate.store.rows import API_KEY, Row, api_key_of


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


class ExchangeSql(ExchangeStatements):
    """``ExchangeStatements`` on a pooled connection."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._c = conn

    async def inbox_row(self, transport: str, delivery_id: str) -> Row | None:
        sql = f"SELECT {INBOX_ROW} FROM inbox WHERE transport = $1 AND delivery_id = $2"
        return await self._c.fetchrow(sql, transport, delivery_id)

    async def final_parts(self, first: str) -> list[tuple[str, str]]:
        rows = await self._c.fetch(
            # The parts' range under the C collation (a database's own may not order ':' before ';'),
            # which the ``outbox_idem_bytes`` index serves.
            "SELECT text, target_json FROM outbox WHERE idem_key = $1"
            ' OR (idem_key COLLATE "C" > $2 AND idem_key COLLATE "C" < $3) ORDER BY id',
            first,
            first + ":",
            first + ";",
        )
        return [(str(r[0]), str(r[1])) for r in rows]

    async def outbox_text(self, idem_key: str) -> str | None:
        text = await self._c.fetchval("SELECT text FROM outbox WHERE idem_key = $1", idem_key)
        return None if text is None else str(text)


async def api_exchange(conn: asyncpg.Connection, transport: str, delivery_id: str) -> ApiExchange | None:
    return await exchange_rules.api_exchange(ExchangeSql(conn), transport, delivery_id)


class PgApiKeys(PgRole):
    """``ApiKeys`` and ``Exchanges``."""

    create_api_key = writes(create_api_key)
    api_key_by_hash = reads(api_key_by_hash)
    list_api_keys = reads(list_api_keys)
    revoke_api_key = writes(revoke_api_key)
    api_exchange = reads(api_exchange)
