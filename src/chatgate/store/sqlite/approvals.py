"""The approvals role over SQLite: its statements; the rules are ``store.approval_rules``.

Writes run inside the group-commit transaction and are pure functions of the database and
their arguments (``now`` is taken before queueing), so re-running one after a rolled-back
batch is safe. The single writer runs them one at a time, so the read-then-update of
``resolve`` is a true compare-and-set; the update is conditional on ``state = 'pending'`` anyway.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from chatgate.domain.approvals import ApprovalRecord, ApprovalResolution, GrantScope
from chatgate.domain.outbox import OutboxDraft
from chatgate.store import approval_rules as rules
from chatgate.store.approval_rules import NoticeFor
from chatgate.store.inline import run_inline
from chatgate.store.rows import APPROVAL, approval_of, approval_values
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads, writes
from chatgate.store.sqlite.outbox import insert_outbox


class ApprovalSql(rules.ApprovalStatements):
    """``ApprovalStatements`` on one connection (each completes at once: see ``run_inline``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._c = conn

    async def approval(self, prompt_id: str, *, lock: bool = False) -> ApprovalRecord | None:
        return get_approval(self._c, prompt_id)  # the one writer: nobody else can change it meanwhile

    async def finish(
        self,
        prompt_id: str,
        state: str,
        tier: str | None,
        reason: str | None,
        by: tuple[str | None, str | None],
        at: float,
    ) -> bool:
        changed = self._c.execute(
            "UPDATE approvals SET state = ?, tier = ?, reason = ?, answered_by_id = ?, answered_by_name = ?,"
            " answered_at = ? WHERE prompt_id = ? AND state = 'pending'",
            (state, tier, reason, by[0], by[1], at, prompt_id),
        ).rowcount
        return bool(changed == 1)

    async def expirable(self) -> list[ApprovalRecord]:
        """Every pending prompt: one process per SQLite store, and its turns are gone at start-up."""
        sql = f"SELECT {APPROVAL} FROM approvals WHERE state = 'pending' ORDER BY requested_at, rowid"
        return [approval_of(r) for r in self._c.execute(sql).fetchall()]

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
        self._c.execute(
            "INSERT INTO approval_grants (scope, session_key, session_id, rule_key, command, prompt_id,"
            " granted_at) VALUES (?,?,?,?,?,?,?) ON CONFLICT (scope, session_key, session_id, rule_key)"
            " DO UPDATE SET command = excluded.command, prompt_id = excluded.prompt_id,"
            " granted_at = excluded.granted_at",
            (scope, session_key, session_id, rule_key, command, prompt_id, now),
        )

    async def session_id_of(self, session_key: str) -> str | None:
        row = self._c.execute("SELECT session_id FROM sessions WHERE key = ?", (session_key,)).fetchone()
        return None if row is None else str(row[0])

    async def grants_found(self, rule_keys: list[str], session_key: str, session_id: str | None) -> int:
        marks = ",".join("?" * len(rule_keys))
        row = self._c.execute(
            f"SELECT COUNT(DISTINCT rule_key) FROM approval_grants WHERE rule_key IN ({marks})"
            " AND (scope = 'always' OR (scope = 'session' AND session_key = ? AND session_id = ?))",
            (*rule_keys, session_key, session_id),
        ).fetchone()
        return int(row[0])

    async def insert_outbox(self, draft: OutboxDraft, now: float) -> None:
        insert_outbox(self._c, draft, now)

    async def announce(self, prompt_id: str) -> None:
        """Nothing to do: the turn waiting on it runs in this process, woken by its answer."""


def create_approval(conn: sqlite3.Connection, record: ApprovalRecord) -> None:
    conn.execute(f"INSERT INTO approvals ({APPROVAL}) VALUES ({','.join('?' * 26)})", approval_values(record))


def get_approval(conn: sqlite3.Connection, prompt_id: str) -> ApprovalRecord | None:
    row = conn.execute(f"SELECT {APPROVAL} FROM approvals WHERE prompt_id = ?", (prompt_id,)).fetchone()
    return approval_of(row) if row else None


def open_approvals(conn: sqlite3.Connection, platform: str, chat_id: str) -> list[ApprovalRecord]:
    rows = conn.execute(
        f"SELECT {APPROVAL} FROM approvals WHERE platform = ? AND chat_id = ? AND state = 'pending'"
        " ORDER BY requested_at, rowid",
        (platform, chat_id),
    ).fetchall()
    return [approval_of(r) for r in rows]


def set_prompt_shown(conn: sqlite3.Connection, prompt_id: str, via: str, message_id: str | None) -> None:
    conn.execute(
        "UPDATE approvals SET prompt_via = ?, prompt_message_id = COALESCE(?, prompt_message_id)"
        " WHERE prompt_id = ?",
        (via, message_id, prompt_id),
    )


def resolve_approval(
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
    """``approval_rules.resolve`` in this transaction (admission's too: an answer commits with its event)."""
    sql = ApprovalSql(conn)
    return run_inline(rules.resolve(sql, prompt_id, outcome, tier, by_id, by_name, now, reason, notice))


class SqliteApprovals(SqliteRole):
    """``Approvals``: writes through the group-commit writer, reads on the reader pool."""

    create_approval = writes(create_approval)
    set_prompt_shown = writes(set_prompt_shown)
    get_approval = reads(get_approval)
    open_approvals = reads(open_approvals)
    resolve_approval = writes(resolve_approval)

    async def expire_open_approvals(
        self, now: float, reason: str, notice_for: NoticeFor | None = None
    ) -> list[ApprovalRecord]:
        return await self._db.write(
            lambda c: run_inline(rules.expire_open(ApprovalSql(c), now, reason, notice_for))
        )

    async def add_grant(
        self, scope: GrantScope, session_key: str | None, rule_key: str, command: str
    ) -> None:
        now = time.time()
        await self._db.write(
            lambda c: run_inline(rules.add_grant(ApprovalSql(c), scope, session_key, rule_key, command, now))
        )

    async def granted(self, session_key: str, rule_keys: Sequence[str]) -> bool:
        keys = tuple(rule_keys)
        return await self._db.read(lambda c: run_inline(rules.granted(ApprovalSql(c), session_key, keys)))
