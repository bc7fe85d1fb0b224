"""The pairing role over PostgreSQL: strangers' codes, approved users, the approval lockout.

Each write takes a transaction-level advisory lock on the pairing state first, so two
processes serving the same bot never issue two codes to one user or count one wrong
guess twice: the read-then-write of each function runs alone, as on SQLite's one writer.
"""

from __future__ import annotations

from collections.abc import Callable

import asyncpg

from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.pairing import (
    ApproveOutcome,
    PairedUser,
    PairingApproval,
    PairingIssue,
    PairingLimits,
    PairingRequest,
    new_code,
    normalize_code,
)
from chatgate.store.postgres.database import PgRole, rowcount
from chatgate.store.postgres.outbox import insert_outbox

NoticeFor = Callable[[PairingRequest], OutboxDraft]
_REQUEST_COLUMNS = "code, platform, user_id, user_name, chat_id, created_at, expires_at"
_GUARD = "approve"
_SERIALIZE = "SELECT pg_advisory_xact_lock(hashtextextended('chatgate-pairing/' || current_schema(), 0))"


def _request(row: asyncpg.Record) -> PairingRequest:
    return PairingRequest(*row)


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
    await conn.execute("DELETE FROM pairing_requests WHERE platform = $1 AND expires_at <= $2", platform, now)
    found = await conn.fetchrow(
        f"SELECT {_REQUEST_COLUMNS}, last_reply_at FROM pairing_requests"
        " WHERE platform = $1 AND user_id = $2",
        platform,
        user_id,
    )
    if found is not None:
        request = PairingRequest(*found[:-1])
        if now - found[-1] < limits.reply_interval_seconds:
            return PairingIssue(request, replied=False)
        await conn.execute(
            "UPDATE pairing_requests SET last_reply_at = $1 WHERE platform = $2 AND user_id = $3",
            now,
            platform,
            user_id,
        )
        await insert_outbox(conn, notice_for(request), now)
        return PairingIssue(request, replied=True)
    live = await conn.fetchval("SELECT COUNT(*) FROM pairing_requests WHERE platform = $1", platform)
    if live >= limits.max_pending:
        return PairingIssue(None, replied=False)
    taken = {r[0] for r in await conn.fetch("SELECT code FROM pairing_requests")}
    code = new_code()
    while code in taken:  # 31^8 codes, at most a few hundred live: this almost never loops
        code = new_code()
    request = PairingRequest(code, platform, user_id, user_name, chat_id, now, now + limits.code_ttl_seconds)
    await conn.execute(
        f"INSERT INTO pairing_requests ({_REQUEST_COLUMNS}, last_reply_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)",
        code,
        platform,
        user_id,
        user_name,
        chat_id,
        now,
        request.expires_at,
        now,
    )
    await insert_outbox(conn, notice_for(request), now)
    return PairingIssue(request, replied=True)


async def _guard(conn: asyncpg.Connection, now: float) -> tuple[int, float | None]:
    row = await conn.fetchrow("SELECT failures, locked_until FROM pairing_guard WHERE name = $1", _GUARD)
    if row is None:
        return 0, None
    failures, locked_until = int(row[0]), row[1]
    if locked_until is not None and now >= locked_until:
        return 0, None  # the lockout is over; counting starts again
    return failures, locked_until


async def _set_guard(conn: asyncpg.Connection, failures: int, locked_until: float | None) -> None:
    await conn.execute(
        "INSERT INTO pairing_guard (name, failures, locked_until) VALUES ($1,$2,$3) ON CONFLICT (name)"
        " DO UPDATE SET failures = excluded.failures, locked_until = excluded.locked_until",
        _GUARD,
        failures,
        locked_until,
    )


async def approve_pairing(
    conn: asyncpg.Connection, code: str, now: float, limits: PairingLimits
) -> PairingApproval:
    await conn.execute(_SERIALIZE)
    failures, locked_until = await _guard(conn, now)
    if locked_until is not None:
        return PairingApproval("locked", locked_until=locked_until, failures=failures)
    wanted = normalize_code(code)
    found = await conn.fetchrow(f"SELECT {_REQUEST_COLUMNS} FROM pairing_requests WHERE code = $1", wanted)
    request = _request(found) if found is not None else None
    if request is None or request.expires_at <= now:
        failures += 1
        lock = now + limits.lockout_seconds if failures >= limits.max_failed_approvals else None
        await _set_guard(conn, failures, lock)
        if request is not None:
            await conn.execute("DELETE FROM pairing_requests WHERE code = $1", wanted)
        outcome: ApproveOutcome = "unknown" if request is None else "expired"
        return PairingApproval(outcome, locked_until=lock, failures=failures)
    await conn.execute(
        "INSERT INTO paired_users (platform, user_id, user_name, code, approved_at) VALUES ($1,$2,$3,$4,$5)"
        " ON CONFLICT (platform, user_id) DO UPDATE SET user_name = excluded.user_name,"
        " code = excluded.code, approved_at = excluded.approved_at",
        request.platform,
        request.user_id,
        request.user_name,
        request.code,
        now,
    )
    await conn.execute("DELETE FROM pairing_requests WHERE code = $1", wanted)
    await _set_guard(conn, 0, None)
    user = PairedUser(request.platform, request.user_id, request.user_name, now, request.code)
    return PairingApproval("approved", user=user)


async def revoke_pairing(conn: asyncpg.Connection, platform: str, user_id: str) -> bool:
    await conn.execute(_SERIALIZE)
    gone = await conn.execute(
        "DELETE FROM paired_users WHERE platform = $1 AND user_id = $2", platform, user_id
    )
    await conn.execute("DELETE FROM pairing_requests WHERE platform = $1 AND user_id = $2", platform, user_id)
    return rowcount(gone) > 0


async def paired_users(conn: asyncpg.Connection, platform: str | None) -> list[PairedUser]:
    rows = await conn.fetch(
        "SELECT platform, user_id, user_name, approved_at, code FROM paired_users"
        " WHERE $1::text IS NULL OR platform = $1 ORDER BY approved_at, user_id",
        platform,
    )
    return [PairedUser(*r) for r in rows]


async def pending_pairings(conn: asyncpg.Connection, now: float) -> list[PairingRequest]:
    rows = await conn.fetch(
        f"SELECT {_REQUEST_COLUMNS} FROM pairing_requests WHERE expires_at > $1 ORDER BY created_at, code",
        now,
    )
    return [_request(r) for r in rows]


class PgPairing(PgRole):
    """``Pairing``: each write is one transaction, serialized with the others by an advisory lock."""

    async def request_pairing(
        self,
        platform: str,
        user_id: str,
        user_name: str | None,
        chat_id: str | None,
        now: float,
        limits: PairingLimits,
        notice_for: NoticeFor,
    ) -> PairingIssue:
        return await self._db.write(
            lambda c: request_pairing(c, platform, user_id, user_name, chat_id, now, limits, notice_for)
        )

    async def approve_pairing(self, code: str, now: float, limits: PairingLimits) -> PairingApproval:
        return await self._db.write(lambda c: approve_pairing(c, code, now, limits))

    async def revoke_pairing(self, platform: str, user_id: str) -> bool:
        return await self._db.write(lambda c: revoke_pairing(c, platform, user_id))

    async def paired_users(self, platform: str | None = None) -> list[PairedUser]:
        return await self._db.read(lambda c: paired_users(c, platform))

    async def pending_pairings(self, now: float) -> list[PairingRequest]:
        return await self._db.read(lambda c: pending_pairings(c, now))
