"""The pairing role over PostgreSQL: its statements; the rules are ``store.pairing_rules``.

Each write takes a transaction-level advisory lock on the pairing state first, so two
processes serving the same bot never issue two codes to one user or count one wrong
guess twice: the read-then-write of each rule runs alone, as on SQLite's one writer.
"""

from __future__ import annotations

import asyncpg

from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.pairing import PairedUser, PairingApproval, PairingIssue, PairingLimits, PairingRequest
from chatgate.store import pairing_rules as rules
from chatgate.store.pairing_rules import NoticeFor
from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.forwards import reads, writes
from chatgate.store.postgres.outbox import insert_outbox
from chatgate.store.postgres.sql import rowcount
from chatgate.store.rows import PAIRED_USER, PAIRING_REQUEST, paired_user_of, pairing_request_of

_GUARD = "approve"
_SERIALIZE = "SELECT pg_advisory_xact_lock(hashtextextended('chatgate-pairing/' || current_schema(), 0))"


class PairingSql(rules.PairingStatements):
    """``PairingStatements`` on the connection of one transaction."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._c = conn

    async def drop_expired(self, platform: str, now: float) -> None:
        await self._c.execute(
            "DELETE FROM pairing_requests WHERE platform = $1 AND expires_at <= $2", platform, now
        )

    async def request_of(self, platform: str, user_id: str) -> tuple[PairingRequest, float] | None:
        row = await self._c.fetchrow(
            f"SELECT {PAIRING_REQUEST}, last_reply_at FROM pairing_requests"
            " WHERE platform = $1 AND user_id = $2",
            platform,
            user_id,
        )
        return None if row is None else (pairing_request_of(tuple(row)[:-1]), float(row[-1]))

    async def note_reply(self, platform: str, user_id: str, now: float) -> None:
        await self._c.execute(
            "UPDATE pairing_requests SET last_reply_at = $1 WHERE platform = $2 AND user_id = $3",
            now,
            platform,
            user_id,
        )

    async def live_requests(self, platform: str) -> int:
        return int(
            await self._c.fetchval("SELECT COUNT(*) FROM pairing_requests WHERE platform = $1", platform)
        )

    async def codes(self) -> set[str]:
        return {str(r[0]) for r in await self._c.fetch("SELECT code FROM pairing_requests")}

    async def insert_request(self, request: PairingRequest, now: float) -> None:
        r = request
        await self._c.execute(
            f"INSERT INTO pairing_requests ({PAIRING_REQUEST}, last_reply_at)"
            " VALUES ($1,$2,$3,$4,$5,$6,$7,$8)",
            *(r.code, r.platform, r.user_id, r.user_name, r.chat_id, r.created_at, r.expires_at, now),
        )

    async def request_by_code(self, code: str) -> PairingRequest | None:
        row = await self._c.fetchrow(f"SELECT {PAIRING_REQUEST} FROM pairing_requests WHERE code = $1", code)
        return None if row is None else pairing_request_of(row)

    async def delete_request(self, code: str) -> None:
        await self._c.execute("DELETE FROM pairing_requests WHERE code = $1", code)

    async def pair(self, user: PairedUser) -> None:
        await self._c.execute(
            "INSERT INTO paired_users (platform, user_id, user_name, code, approved_at)"
            " VALUES ($1,$2,$3,$4,$5)"
            " ON CONFLICT (platform, user_id) DO UPDATE SET user_name = excluded.user_name,"
            " code = excluded.code, approved_at = excluded.approved_at",
            *(user.platform, user.user_id, user.user_name, user.code, user.approved_at),
        )

    async def guard(self) -> tuple[int, float | None] | None:
        row = await self._c.fetchrow(
            "SELECT failures, locked_until FROM pairing_guard WHERE name = $1", _GUARD
        )
        return None if row is None else (int(row[0]), row[1])

    async def set_guard(self, failures: int, locked_until: float | None) -> None:
        await self._c.execute(
            "INSERT INTO pairing_guard (name, failures, locked_until) VALUES ($1,$2,$3) ON CONFLICT (name)"
            " DO UPDATE SET failures = excluded.failures, locked_until = excluded.locked_until",
            *(_GUARD, failures, locked_until),
        )

    async def insert_outbox(self, draft: OutboxDraft, now: float) -> None:
        await insert_outbox(self._c, draft, now)


async def request_pairing(
    conn: asyncpg.Connection,
    platform: str,
    user_id: str,
    user_name: str | None,
    chat_id: str | None,
    now: float,
    limits: PairingLimits,
    notice_for: NoticeFor,
) -> PairingIssue:
    await conn.execute(_SERIALIZE)
    sql = PairingSql(conn)
    return await rules.request_pairing(sql, platform, user_id, user_name, chat_id, now, limits, notice_for)


async def approve_pairing(
    conn: asyncpg.Connection, code: str, now: float, limits: PairingLimits
) -> PairingApproval:
    await conn.execute(_SERIALIZE)
    return await rules.approve_pairing(PairingSql(conn), code, now, limits)


async def revoke_pairing(conn: asyncpg.Connection, platform: str, user_id: str) -> bool:
    await conn.execute(_SERIALIZE)
    gone = await conn.execute(
        "DELETE FROM paired_users WHERE platform = $1 AND user_id = $2", platform, user_id
    )
    await conn.execute("DELETE FROM pairing_requests WHERE platform = $1 AND user_id = $2", platform, user_id)
    return rowcount(gone) > 0


async def paired_users(conn: asyncpg.Connection, platform: str | None = None) -> list[PairedUser]:
    rows = await conn.fetch(
        f"SELECT {PAIRED_USER} FROM paired_users"
        " WHERE $1::text IS NULL OR platform = $1 ORDER BY approved_at, user_id",
        platform,
    )
    return [paired_user_of(r) for r in rows]


async def pending_pairings(conn: asyncpg.Connection, now: float) -> list[PairingRequest]:
    rows = await conn.fetch(
        f"SELECT {PAIRING_REQUEST} FROM pairing_requests WHERE expires_at > $1 ORDER BY created_at, code",
        now,
    )
    return [pairing_request_of(r) for r in rows]


class PgPairing(PgRole):
    """``Pairing``: each write is one transaction, serialized with the others by an advisory lock."""

    request_pairing = writes(request_pairing)
    approve_pairing = writes(approve_pairing)
    revoke_pairing = writes(revoke_pairing)
    paired_users = reads(paired_users)
    pending_pairings = reads(pending_pairings)
