"""The approvals role over PostgreSQL: approval prompts and remembered approvals (grants).

``resolve`` reads the prompt ``FOR UPDATE`` and updates it only while ``state =
'pending'``, so of two processes answering one prompt at once exactly one wins; the
winner's grants and notice commit in its transaction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Literal

import asyncpg

from chatgate.domain.approvals import ApprovalRecord, ApprovalResolution, GrantScope
from chatgate.domain.outbox import OutboxDraft
from chatgate.store.postgres.database import NOTIFY, NOW, PgRole, rowcount
from chatgate.store.postgres.outbox import insert_outbox
from chatgate.store.sqlite.codec import dumps

_COLUMNS = (
    "prompt_id, session_key, session_id, inbox_seq, call_id, tool, command, rule_keys, offered_tiers,"
    " requester_id, requester_name, requested_at, expires_at, platform, chat_id, target_json, reply_to,"
    " prompt_text, prompt_via, state, tier, reason, answered_by_id, answered_by_name, answered_at,"
    " prompt_message_id"
)
ALWAYS_KEY = ""
"""The session key (and session id) column of an ``always`` grant: it belongs to no session."""

NoticeFor = Callable[[ApprovalRecord], OutboxDraft | None]


def record(row: asyncpg.Record) -> ApprovalRecord:
    return ApprovalRecord(
        prompt_id=row[0],
        session_key=row[1],
        session_id=row[2],
        inbox_seq=row[3],
        call_id=row[4],
        tool=row[5],
        command=row[6],
        rule_keys=tuple(json.loads(row[7])),
        offered_tiers=tuple(json.loads(row[8])),
        requester_id=row[9],
        requester_name=row[10],
        requested_at=row[11],
        expires_at=row[12],
        platform=row[13],
        chat_id=row[14],
        target=json.loads(row[15]),
        reply_to=row[16],
        prompt_text=row[17],
        prompt_via=row[18],
        state=row[19],
        tier=row[20],
        reason=row[21],
        answered_by_id=row[22],
        answered_by_name=row[23],
        answered_at=row[24],
        prompt_message_id=row[25],
    )


async def insert(conn: asyncpg.Connection, rec: ApprovalRecord) -> None:
    marks = ",".join(f"${i}" for i in range(1, 27))
    await conn.execute(
        f"INSERT INTO approvals ({_COLUMNS}) VALUES ({marks})",
        rec.prompt_id,
        rec.session_key,
        rec.session_id,
        rec.inbox_seq,
        rec.call_id,
        rec.tool,
        rec.command,
        dumps(list(rec.rule_keys)),
        dumps(list(rec.offered_tiers)),
        rec.requester_id,
        rec.requester_name,
        rec.requested_at,
        rec.expires_at,
        rec.platform,
        rec.chat_id,
        dumps(rec.target),
        rec.reply_to,
        rec.prompt_text,
        rec.prompt_via,
        rec.state,
        rec.tier,
        rec.reason,
        rec.answered_by_id,
        rec.answered_by_name,
        rec.answered_at,
        rec.prompt_message_id,
    )


async def get(conn: asyncpg.Connection, prompt_id: str, *, lock: bool = False) -> ApprovalRecord | None:
    suffix = " FOR UPDATE" if lock else ""
    row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM approvals WHERE prompt_id = $1{suffix}", prompt_id)
    return record(row) if row else None


async def open_for_chat(conn: asyncpg.Connection, platform: str, chat_id: str) -> list[ApprovalRecord]:
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM approvals WHERE platform = $1 AND chat_id = $2 AND state = 'pending'"
        " ORDER BY requested_at, created_seq",
        platform,
        chat_id,
    )
    return [record(r) for r in rows]


async def set_shown(conn: asyncpg.Connection, prompt_id: str, via: str, message_id: str | None) -> None:
    await conn.execute(
        "UPDATE approvals SET prompt_via = $1, prompt_message_id = COALESCE($2, prompt_message_id)"
        " WHERE prompt_id = $3",
        via,
        message_id,
        prompt_id,
    )


async def _finish(
    conn: asyncpg.Connection,
    rec: ApprovalRecord,
    state: str,
    tier: str | None,
    reason: str | None,
    by: tuple[str | None, str | None],
    now: float,
) -> ApprovalRecord | None:
    status = await conn.execute(
        "UPDATE approvals SET state = $1, tier = $2, reason = $3, answered_by_id = $4,"
        " answered_by_name = $5, answered_at = $6 WHERE prompt_id = $7 AND state = 'pending'",
        state,
        tier,
        reason,
        by[0],
        by[1],
        now,
        rec.prompt_id,
    )
    if rowcount(status) != 1:
        return None
    return replace(
        rec,
        state=state,  # type: ignore[arg-type]
        tier=tier,
        reason=reason,
        answered_by_id=by[0],
        answered_by_name=by[1],
        answered_at=now,
    )


async def resolve(
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
    """The compare-and-set. ``notice`` (and the grants of a remembered approval) are
    recorded only when this call wins."""
    found = await get(conn, prompt_id, lock=True)
    if found is None or found.state != "pending":
        return ApprovalResolution(found, False)
    if outcome != "expired" and now >= found.expires_at:
        late = await _finish(conn, found, "expired", None, "timeout", (None, None), found.expires_at)
        return ApprovalResolution(late or await get(conn, prompt_id), False)
    recorded_tier = tier if outcome == "approved" else None
    done = await _finish(conn, found, outcome, recorded_tier, reason, (by_id, by_name), now)
    if done is None:
        return ApprovalResolution(await get(conn, prompt_id), False)
    if outcome == "approved" and recorded_tier in ("session", "always"):
        for rule_key in done.rule_keys:
            await _grant(conn, recorded_tier, done.session_key, done.session_id, rule_key, done, now)
    if notice is not None:
        await insert_outbox(conn, notice, now)
    await conn.execute(NOTIFY, f"approval:{prompt_id}")  # the turn waiting on it may run elsewhere
    return ApprovalResolution(done, True)


async def expire_open(
    conn: asyncpg.Connection, now: float, reason: str, notice_for: NoticeFor | None, holder: str
) -> list[ApprovalRecord]:
    """The pending prompts whose turn died: a prompt of a session a live peer still leases
    is that peer's, waiting for its answer, and stays pending."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM approvals a WHERE state = 'pending' AND NOT EXISTS (SELECT 1"
        " FROM sessions s WHERE s.key = a.session_key AND s.lease_owner IS NOT NULL"
        f" AND s.lease_holder IS DISTINCT FROM $1 AND s.lease_expires >= {NOW})"
        " ORDER BY requested_at, created_seq FOR UPDATE OF a SKIP LOCKED",
        holder,
    )
    expired: list[ApprovalRecord] = []
    for row in rows:
        done = await _finish(conn, record(row), "expired", None, reason, (None, None), now)
        if done is None:
            continue
        expired.append(done)
        draft = notice_for(done) if notice_for is not None else None
        if draft is not None:
            await insert_outbox(conn, draft, now)
    return expired


async def _grant(
    conn: asyncpg.Connection,
    scope: str,
    session_key: str,
    session_id: str,
    rule_key: str,
    source: ApprovalRecord | None,
    now: float,
    command: str | None = None,
) -> None:
    if scope == "always":
        session_key = session_id = ALWAYS_KEY
    await conn.execute(
        "INSERT INTO approval_grants (scope, session_key, session_id, rule_key, command, prompt_id,"
        " granted_at) VALUES ($1,$2,$3,$4,$5,$6,$7) ON CONFLICT (scope, session_key, session_id, rule_key)"
        " DO UPDATE SET command = excluded.command, prompt_id = excluded.prompt_id,"
        " granted_at = excluded.granted_at",
        scope,
        session_key,
        session_id,
        rule_key,
        command if command is not None else (source.command if source else ""),
        source.prompt_id if source else None,
        now,
    )


async def add_grant(
    conn: asyncpg.Connection, scope: str, session_key: str | None, rule_key: str, command: str, now: float
) -> None:
    """A session grant belongs to the session's current conversation (its ``session_id``)."""
    if scope not in ("session", "always"):
        raise ValueError(f"grant scope must be 'session' or 'always', not {scope!r}")
    if scope == "session":
        if not session_key:
            raise ValueError("a session grant needs a session key")
        session_id = await conn.fetchval("SELECT session_id FROM sessions WHERE key = $1", session_key)
        if session_id is None:
            raise ValueError(f"no session {session_key!r} to grant for")
        await _grant(conn, scope, session_key, session_id, rule_key, None, now, command)
        return
    await _grant(conn, scope, ALWAYS_KEY, ALWAYS_KEY, rule_key, None, now, command)


async def granted(conn: asyncpg.Connection, session_key: str, rule_keys: Sequence[str]) -> bool:
    if not rule_keys:
        return True
    session_id = await conn.fetchval("SELECT session_id FROM sessions WHERE key = $1", session_key)
    found = await conn.fetchval(
        "SELECT COUNT(DISTINCT rule_key) FROM approval_grants WHERE rule_key = ANY($1::text[])"
        " AND (scope = 'always' OR (scope = 'session' AND session_key = $2 AND session_id = $3))",
        sorted(set(rule_keys)),
        session_key,
        session_id,
    )
    return int(found) == len(set(rule_keys))


class PgApprovals(PgRole):
    """``Approvals``."""

    async def create_approval(self, record: ApprovalRecord) -> None:
        await self._db.write(lambda c: insert(c, record))

    async def set_prompt_shown(self, prompt_id: str, via: str, message_id: str | None) -> None:
        await self._db.write(lambda c: set_shown(c, prompt_id, via, message_id))

    async def get_approval(self, prompt_id: str) -> ApprovalRecord | None:
        return await self._db.read(lambda c: get(c, prompt_id))

    async def open_approvals(self, platform: str, chat_id: str) -> list[ApprovalRecord]:
        return await self._db.read(lambda c: open_for_chat(c, platform, chat_id))

    async def resolve_approval(
        self,
        prompt_id: str,
        outcome: Literal["approved", "denied", "expired"],
        tier: str | None,
        by_id: str | None,
        by_name: str | None,
        now: float,
        *,
        reason: str | None = None,
        notice: OutboxDraft | None = None,
    ) -> ApprovalResolution:
        return await self._db.write(
            lambda c: resolve(c, prompt_id, outcome, tier, by_id, by_name, now, reason, notice)
        )

    async def expire_open_approvals(
        self, now: float, reason: str, notice_for: NoticeFor | None = None
    ) -> list[ApprovalRecord]:
        holder = self._db.holder
        return await self._db.write(lambda c: expire_open(c, now, reason, notice_for, holder))

    async def add_grant(
        self, scope: GrantScope, session_key: str | None, rule_key: str, command: str
    ) -> None:
        now = time.time()
        await self._db.write(lambda c: add_grant(c, scope, session_key, rule_key, command, now))

    async def granted(self, session_key: str, rule_keys: Sequence[str]) -> bool:
        keys = tuple(rule_keys)
        return await self._db.read(lambda c: granted(c, session_key, keys))
