"""The approvals role over SQLite: approval prompts and remembered approvals (grants).

Write functions run inside the group-commit transaction and are pure functions of the
database and their arguments (``now`` is taken before queueing), so re-running one
after a rolled-back batch is safe. The single writer runs them one at a time, so the
read-then-update of ``resolve`` is a true compare-and-set; the update is conditional on
``state = 'pending'`` anyway.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Literal

from chatgate.domain.approvals import ApprovalRecord, ApprovalResolution, GrantScope
from chatgate.domain.outbox import OutboxDraft
from chatgate.store.sqlite.codec import dumps
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.outbox import insert_outbox

_COLUMNS = (
    "prompt_id, session_key, session_id, inbox_seq, call_id, tool, command, rule_keys, offered_tiers,"
    " requester_id, requester_name, requested_at, expires_at, platform, chat_id, target_json, reply_to,"
    " prompt_text, prompt_via, state, tier, reason, answered_by_id, answered_by_name, answered_at,"
    " prompt_message_id"
)
ALWAYS_KEY = ""
"""The session key (and session id) column of an ``always`` grant: it belongs to no session."""

NoticeFor = Callable[[ApprovalRecord], OutboxDraft | None]


def record(row: Sequence[Any]) -> ApprovalRecord:
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


def insert(conn: sqlite3.Connection, rec: ApprovalRecord) -> None:
    conn.execute(
        f"INSERT INTO approvals ({_COLUMNS}) VALUES ({','.join('?' * 26)})",
        (
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
        ),
    )


def get(conn: sqlite3.Connection, prompt_id: str) -> ApprovalRecord | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM approvals WHERE prompt_id = ?", (prompt_id,)).fetchone()
    return record(row) if row else None


def open_for_chat(conn: sqlite3.Connection, platform: str, chat_id: str) -> list[ApprovalRecord]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM approvals WHERE platform = ? AND chat_id = ? AND state = 'pending'"
        " ORDER BY requested_at, rowid",
        (platform, chat_id),
    ).fetchall()
    return [record(r) for r in rows]


def set_shown(conn: sqlite3.Connection, prompt_id: str, via: str, message_id: str | None) -> None:
    conn.execute(
        "UPDATE approvals SET prompt_via = ?, prompt_message_id = COALESCE(?, prompt_message_id)"
        " WHERE prompt_id = ?",
        (via, message_id, prompt_id),
    )


def _finish(
    conn: sqlite3.Connection,
    rec: ApprovalRecord,
    state: str,
    tier: str | None,
    reason: str | None,
    by_id: str | None,
    by_name: str | None,
    now: float,
) -> ApprovalRecord | None:
    changed = conn.execute(
        "UPDATE approvals SET state = ?, tier = ?, reason = ?, answered_by_id = ?, answered_by_name = ?,"
        " answered_at = ? WHERE prompt_id = ? AND state = 'pending'",
        (state, tier, reason, by_id, by_name, now, rec.prompt_id),
    ).rowcount
    if changed != 1:
        return None
    return replace(
        rec,
        state=state,  # type: ignore[arg-type]
        tier=tier,
        reason=reason,
        answered_by_id=by_id,
        answered_by_name=by_name,
        answered_at=now,
    )


def resolve(
    conn: sqlite3.Connection,
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
    found = get(conn, prompt_id)
    if found is None or found.state != "pending":
        return ApprovalResolution(found, False)
    if outcome != "expired" and now >= found.expires_at:
        # Too late: the answer loses, and the row records what really happened.
        late = _finish(conn, found, "expired", None, "timeout", None, None, found.expires_at)
        return ApprovalResolution(late or get(conn, prompt_id), False)
    recorded_tier = tier if outcome == "approved" else None
    done = _finish(conn, found, outcome, recorded_tier, reason, by_id, by_name, now)
    if done is None:
        return ApprovalResolution(get(conn, prompt_id), False)
    if outcome == "approved" and recorded_tier in ("session", "always"):
        for rule_key in done.rule_keys:
            _grant(conn, recorded_tier, done.session_key, done.session_id, rule_key, done.command, done, now)
    if notice is not None:
        insert_outbox(conn, notice, now)
    return ApprovalResolution(done, True)


def expire_open(
    conn: sqlite3.Connection, now: float, reason: str, notice_for: NoticeFor | None
) -> list[ApprovalRecord]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM approvals WHERE state = 'pending' ORDER BY requested_at, rowid"
    ).fetchall()
    expired: list[ApprovalRecord] = []
    for row in rows:
        done = _finish(conn, record(row), "expired", None, reason, None, None, now)
        if done is None:
            continue
        expired.append(done)
        draft = notice_for(done) if notice_for is not None else None
        if draft is not None:
            insert_outbox(conn, draft, now)
    return expired


def _grant(
    conn: sqlite3.Connection,
    scope: str,
    session_key: str,
    session_id: str,
    rule_key: str,
    command: str,
    source: ApprovalRecord | None,
    now: float,
) -> None:
    if scope == "always":
        session_key = session_id = ALWAYS_KEY
    conn.execute(
        "INSERT INTO approval_grants (scope, session_key, session_id, rule_key, command, prompt_id,"
        " granted_at) VALUES (?,?,?,?,?,?,?) ON CONFLICT (scope, session_key, session_id, rule_key)"
        " DO UPDATE SET command = excluded.command, prompt_id = excluded.prompt_id,"
        " granted_at = excluded.granted_at",
        (scope, session_key, session_id, rule_key, command, source.prompt_id if source else None, now),
    )


def add_grant(
    conn: sqlite3.Connection, scope: str, session_key: str | None, rule_key: str, command: str, now: float
) -> None:
    """A session grant belongs to the session's current conversation (its ``session_id``):
    ``/new`` starts another one, so the grant no longer applies."""
    if scope not in ("session", "always"):
        raise ValueError(f"grant scope must be 'session' or 'always', not {scope!r}")
    if scope == "session":
        if not session_key:
            raise ValueError("a session grant needs a session key")
        row = conn.execute("SELECT session_id FROM sessions WHERE key = ?", (session_key,)).fetchone()
        if row is None:
            raise ValueError(f"no session {session_key!r} to grant for")
        _grant(conn, scope, session_key, row[0], rule_key, command, None, now)
        return
    _grant(conn, scope, ALWAYS_KEY, ALWAYS_KEY, rule_key, command, None, now)


def granted(conn: sqlite3.Connection, session_key: str, rule_keys: Sequence[str]) -> bool:
    if not rule_keys:
        return True
    current = conn.execute("SELECT session_id FROM sessions WHERE key = ?", (session_key,)).fetchone()
    session_id = current[0] if current else None
    for rule_key in set(rule_keys):
        found = conn.execute(
            "SELECT 1 FROM approval_grants WHERE rule_key = ? AND ((scope = 'always')"
            " OR (scope = 'session' AND session_key = ? AND session_id = ?)) LIMIT 1",
            (rule_key, session_key, session_id),
        ).fetchone()
        if found is None:
            return False
    return True


class SqliteApprovals(SqliteRole):
    """``Approvals``: writes through the group-commit writer, reads on the reader pool."""

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
        return await self._db.write(lambda c: expire_open(c, now, reason, notice_for))

    async def add_grant(
        self, scope: GrantScope, session_key: str | None, rule_key: str, command: str
    ) -> None:
        now = time.time()
        await self._db.write(lambda c: add_grant(c, scope, session_key, rule_key, command, now))

    async def granted(self, session_key: str, rule_keys: Sequence[str]) -> bool:
        keys = tuple(rule_keys)
        return await self._db.read(lambda c: granted(c, session_key, keys))
