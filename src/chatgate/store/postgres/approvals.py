"""The approvals role over PostgreSQL: its statements; the rules are ``store.approval_rules``.

``resolve`` reads the prompt ``FOR UPDATE`` and updates it only while ``state =
'pending'``, so of two processes answering one prompt at once exactly one wins; the
winner's grants and notice commit in its transaction, and its ``approval:<id>`` notice
wakes the turn waiting on it wherever that runs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import asyncpg

from chatgate.domain.approvals import ApprovalRecord, ApprovalResolution, GrantScope
from chatgate.domain.outbox import OutboxDraft
from chatgate.store import approval_rules as rules
from chatgate.store.approval_rules import NoticeFor
from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.forwards import reads, writes
from chatgate.store.postgres.outbox import insert_outbox
from chatgate.store.postgres.sql import NOTIFY, NOW, rowcount
from chatgate.store.rows import APPROVAL, approval_of, approval_values


class ApprovalSql(rules.ApprovalStatements):
    """``ApprovalStatements`` on the connection of one transaction; ``holder`` is this store instance."""

    def __init__(self, conn: asyncpg.Connection, holder: str = "") -> None:
        self._c = conn
        self._holder = holder

    async def approval(self, prompt_id: str, *, lock: bool = False) -> ApprovalRecord | None:
        return await get(self._c, prompt_id, lock=lock)

    async def finish(
        self,
        prompt_id: str,
        state: str,
        tier: str | None,
        reason: str | None,
        by: tuple[str | None, str | None],
        at: float,
    ) -> bool:
        status = await self._c.execute(
            "UPDATE approvals SET state = $1, tier = $2, reason = $3, answered_by_id = $4,"
            " answered_by_name = $5, answered_at = $6 WHERE prompt_id = $7 AND state = 'pending'",
            *(state, tier, reason, by[0], by[1], at, prompt_id),
        )
        return rowcount(status) == 1

    async def expirable(self) -> list[ApprovalRecord]:
        """A prompt of a session a live peer still leases is that peer's, waiting for its answer."""
        rows = await self._c.fetch(
            f"SELECT {APPROVAL} FROM approvals a WHERE state = 'pending' AND NOT EXISTS (SELECT 1"
            " FROM sessions s WHERE s.key = a.session_key AND s.lease_owner IS NOT NULL"
            f" AND s.lease_holder IS DISTINCT FROM $1 AND s.lease_expires >= {NOW})"
            " ORDER BY requested_at, created_seq FOR UPDATE OF a SKIP LOCKED",
            self._holder,
        )
        return [approval_of(r) for r in rows]

    async def grant(
        self,
        scope: str,
        session_key: str,
        session_id: str,
        rule_key: str,
        command: str,
        prompt_id: str | None,
        now: float,
    ) -> None:
        await self._c.execute(
            "INSERT INTO approval_grants (scope, session_key, session_id, rule_key, command, prompt_id,"
            " granted_at) VALUES ($1,$2,$3,$4,$5,$6,$7)"
            " ON CONFLICT (scope, session_key, session_id, rule_key)"
            " DO UPDATE SET command = excluded.command, prompt_id = excluded.prompt_id,"
            " granted_at = excluded.granted_at",
            *(scope, session_key, session_id, rule_key, command, prompt_id, now),
        )

    async def session_id_of(self, session_key: str) -> str | None:
        found = await self._c.fetchval("SELECT session_id FROM sessions WHERE key = $1", session_key)
        return None if found is None else str(found)

    async def grants_found(self, rule_keys: list[str], session_key: str, session_id: str | None) -> int:
        found = await self._c.fetchval(
            "SELECT COUNT(DISTINCT rule_key) FROM approval_grants WHERE rule_key = ANY($1::text[])"
            " AND (scope = 'always' OR (scope = 'session' AND session_key = $2 AND session_id = $3))",
            rule_keys,
            session_key,
            session_id,
        )
        return int(found)

    async def insert_outbox(self, draft: OutboxDraft, now: float) -> None:
        await insert_outbox(self._c, draft, now)

    async def announce(self, prompt_id: str) -> None:
        await self._c.execute(NOTIFY, f"approval:{prompt_id}")  # the turn waiting on it may run elsewhere


async def create_approval(conn: asyncpg.Connection, record: ApprovalRecord) -> None:
    marks = ",".join(f"${i}" for i in range(1, 27))
    await conn.execute(f"INSERT INTO approvals ({APPROVAL}) VALUES ({marks})", *approval_values(record))


async def get(conn: asyncpg.Connection, prompt_id: str, *, lock: bool = False) -> ApprovalRecord | None:
    suffix = " FOR UPDATE" if lock else ""
    row = await conn.fetchrow(f"SELECT {APPROVAL} FROM approvals WHERE prompt_id = $1{suffix}", prompt_id)
    return approval_of(row) if row else None


async def open_approvals(conn: asyncpg.Connection, platform: str, chat_id: str) -> list[ApprovalRecord]:
    rows = await conn.fetch(
        f"SELECT {APPROVAL} FROM approvals WHERE platform = $1 AND chat_id = $2 AND state = 'pending'"
        " ORDER BY requested_at, created_seq",
        platform,
        chat_id,
    )
    return [approval_of(r) for r in rows]


async def set_prompt_shown(
    conn: asyncpg.Connection, prompt_id: str, via: str, message_id: str | None
) -> None:
    await conn.execute(
        "UPDATE approvals SET prompt_via = $1, prompt_message_id = COALESCE($2, prompt_message_id)"
        " WHERE prompt_id = $3",
        via,
        message_id,
        prompt_id,
    )


async def resolve_approval(
    conn: asyncpg.Connection,
    prompt_id: str,
    outcome: str,
    tier: str | None,
    by_id: str | None,
    by_name: str | None,
    now: float,
    reason: str | None = None,
    notice: OutboxDraft | None = None,
) -> ApprovalResolution:
    """``approval_rules.resolve`` in this transaction (admission's too: an answer commits with its event)."""
    sql = ApprovalSql(conn)
    return await rules.resolve(sql, prompt_id, outcome, tier, by_id, by_name, now, reason, notice)


class PgApprovals(PgRole):
    """``Approvals``."""

    create_approval = writes(create_approval)
    set_prompt_shown = writes(set_prompt_shown)
    open_approvals = reads(open_approvals)
    resolve_approval = writes(resolve_approval)

    async def get_approval(self, prompt_id: str) -> ApprovalRecord | None:
        return await self._db.read(lambda c: get(c, prompt_id))

    async def expire_open_approvals(
        self, now: float, reason: str, notice_for: NoticeFor | None = None
    ) -> list[ApprovalRecord]:
        holder = self._db.holder
        return await self._db.write(
            lambda c: rules.expire_open(ApprovalSql(c, holder), now, reason, notice_for)
        )

    async def add_grant(
        self, scope: GrantScope, session_key: str | None, rule_key: str, command: str
    ) -> None:
        now = time.time()
        await self._db.write(
            lambda c: rules.add_grant(ApprovalSql(c), scope, session_key, rule_key, command, now)
        )

    async def granted(self, session_key: str, rule_keys: Sequence[str]) -> bool:
        keys = tuple(rule_keys)
        return await self._db.read(lambda c: rules.granted(ApprovalSql(c), session_key, keys))
