"""The outbox role over SQLite: the ledger of outbound messages, claimed head of chat first.

Write functions run inside the group-commit transaction and must be pure functions of
the database and their arguments (``now`` is taken before queueing), so re-running one
after a rolled-back batch is safe. ``insert_outbox`` is also how the other roles' writes
(a turn's commit, a command's reply, an approval's notice) record messages in their own
transaction.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import cast

from msgspec.structs import replace

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.outbox import OutboxDraft, OutboxRow, OutboxSettlement, OutboxStatus, Undelivered
from chatgate.store.codec import draft_columns, dumps, loads
from chatgate.store.rows import OUTBOX, STUCK, STUCK_WHERE, outbox_row, stuck_reply
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads
from chatgate.store.sqlite.plans import OPEN_ROWS


def insert_outbox(conn: sqlite3.Connection, draft: OutboxDraft, now: float) -> None:
    """Record ``draft`` as a pending row; an existing ``idem_key`` makes this a no-op."""
    conn.execute(
        "INSERT INTO outbox (idem_key, platform, chat_id, session_key, kind, text, in_reply_to,"
        " target_json, status, created_at) VALUES (?,?,?,?,?,?,?,?, 'pending', ?)"
        " ON CONFLICT (idem_key) DO NOTHING",
        draft_columns(draft, dumps(draft.target), now),
    )


def insert_claimed(conn: sqlite3.Connection, draft: OutboxDraft, now: float) -> OutboxRow | None:
    """Record ``draft`` already claimed if its chat has no open row, as ``claim_outbox`` would
    claim it (``sending``, its first attempt counted); otherwise record it ``pending``.

    Returns the claimed row, or None when it was recorded pending or its ``idem_key`` existed.
    A new row's id is above every existing one, so "no open row in the chat" is exactly
    ``claim_outbox``'s head-of-chat rule."""
    open_row = conn.execute(
        f"SELECT 1 FROM outbox {OPEN_ROWS} WHERE platform = ? AND chat_id = ?"
        " AND status IN ('pending', 'sending', 'ambiguous') LIMIT 1",
        (draft.platform, draft.chat_id),
    ).fetchone()
    if open_row is not None:
        insert_outbox(conn, draft, now)
        return None
    target = dumps(draft.target)
    added = conn.execute(
        "INSERT INTO outbox (idem_key, platform, chat_id, session_key, kind, text, in_reply_to,"
        " target_json, status, attempts, created_at) VALUES (?,?,?,?,?,?,?,?, 'sending', 1, ?)"
        " ON CONFLICT (idem_key) DO NOTHING RETURNING id",
        draft_columns(draft, target, now),
    ).fetchone()
    if added is None:
        return None
    return draft.claimed(added[0], now, loads(target))


def requeue_mid_send(conn: sqlite3.Connection) -> None:
    """Rows a dead process left ``sending`` go back to ``pending`` as possible duplicates."""
    conn.execute(
        f"UPDATE outbox {OPEN_ROWS} SET status = 'pending', possibly_duplicate = 1,"
        " next_attempt_at = NULL WHERE status IN ('pending', 'sending', 'ambiguous') AND status = 'sending'"
    )


def claim_outbox(conn: sqlite3.Connection, limit: int, now: float) -> list[OutboxRow]:
    """Claim due head-of-chat rows; a row left ambiguous is claimed as a possible duplicate."""
    rows = conn.execute(
        f"SELECT {OUTBOX} FROM outbox o {OPEN_ROWS} WHERE o.status IN ('pending', 'sending', 'ambiguous')"
        " AND o.status != 'sending'"
        " AND (o.next_attempt_at IS NULL OR o.next_attempt_at <= ?)"
        " AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.platform = o.platform"
        " AND p.chat_id = o.chat_id AND p.id < o.id AND p.status IN ('pending', 'sending', 'ambiguous'))"
        " ORDER BY o.id LIMIT ?",
        (now, limit),
    ).fetchall()
    conn.executemany(
        "UPDATE outbox SET possibly_duplicate = MAX(possibly_duplicate, status = 'ambiguous'),"
        " status = 'sending', attempts = attempts + 1 WHERE id = ?",
        [(r[0],) for r in rows],
    )
    return [
        replace(
            outbox_row(r),
            status="sending",
            attempts=r[9] + 1,
            possibly_duplicate=bool(r[10]) or r[8] == "ambiguous",
        )
        for r in rows
    ]


def settle_outbox(conn: sqlite3.Connection, settlements: list[OutboxSettlement], now: float) -> bool:
    for s in settlements:
        # A row the client already confirmed stays confirmed whatever a racing send reports.
        conn.execute(
            "UPDATE outbox SET status = ?, platform_message_id = COALESCE(?, platform_message_id),"
            " next_attempt_at = ?, last_error = ?, attempts = attempts - ?,"
            " sent_at = CASE WHEN ? = 'sent' THEN ? ELSE sent_at END"
            " WHERE id = ? AND (confirmed_at IS NULL OR ? = 'sent')",
            (
                s.status,
                s.platform_message_id,
                s.retry_at,
                s.error,
                0 if s.counts_attempt else 1,
                s.status,
                now,
                s.id,
                s.status,
            ),
        )
    return any(_more_in_chat(conn, s.id) for s in settlements)


def _more_in_chat(conn: sqlite3.Connection, row_id: int) -> bool:
    """Another open row waits behind this one in its chat (the chat index finds it)."""
    return (
        conn.execute(
            "SELECT 1 FROM outbox o, outbox r WHERE r.id = ? AND o.platform = r.platform"
            " AND o.chat_id = r.chat_id AND o.id > r.id AND o.status IN ('pending', 'sending', 'ambiguous')"
            " AND o.status != 'sending' LIMIT 1",  # the first IN is the open-row index's own term
            (row_id,),
        ).fetchone()
        is not None
    )


def confirm_outbox(conn: sqlite3.Connection, platform: str, chat_id: str, row_id: int, now: float) -> bool:
    return (
        conn.execute(
            "UPDATE outbox SET confirmed_at = ?, status = 'sent', sent_at = COALESCE(sent_at, ?)"
            " WHERE id = ? AND platform = ? AND chat_id = ? AND confirmed_at IS NULL",
            (now, now, row_id, platform, chat_id),
        ).rowcount
        == 1
    )


def unconfirmed_for_chat(
    conn: sqlite3.Connection, platform: str, chat_id: str, after_id: int = 0, limit: int = -1
) -> list[OutboxRow]:
    rows = conn.execute(
        f"SELECT {OUTBOX} FROM outbox WHERE platform = ? AND chat_id = ? AND id > ?"
        " AND confirmed_at IS NULL AND status IN ('pending', 'sending', 'sent', 'ambiguous')"
        " ORDER BY id LIMIT ?",
        (platform, chat_id, after_id, limit),
    ).fetchall()
    return [outbox_row(r) for r in rows]


def outbox_status(conn: sqlite3.Connection, idem_key: str) -> OutboxStatus | None:
    row = conn.execute("SELECT status FROM outbox WHERE idem_key = ?", (idem_key,)).fetchone()
    return None if row is None else cast(OutboxStatus, row[0])


def undelivered_in_chat(conn: sqlite3.Connection, platform: str, chat_id: str) -> int:
    row = conn.execute(
        f"SELECT COUNT(*) FROM outbox {OPEN_ROWS} WHERE platform = ? AND chat_id = ?"
        " AND status IN ('pending', 'sending', 'ambiguous')",
        (platform, chat_id),
    ).fetchone()
    return int(row[0])


class SqliteOutbox(SqliteRole):
    """``Outbox``: claims and settlements (delivery), confirmations (web chat), notices."""

    async def claim_outbox(self, limit: int) -> list[OutboxRow]:
        now = time.time()
        return await self._db.write(lambda c: claim_outbox(c, limit, now))

    async def settle_outbox(self, settlements: list[OutboxSettlement]) -> bool:
        if not settlements:
            return False
        now = time.time()

        def settle(conn: sqlite3.Connection) -> bool:
            return settle_outbox(conn, settlements, now)

        # A row is 'sending' only by a FULL commit (a turn's commit or ``claim_outbox``), so a
        # lost 'sent' leaves it 'sending': a restart resends it marked as a possible duplicate,
        # as after a death mid-send. Any other outcome stays FULL: lost, it would have a row
        # that was never delivered (or was refused) sent again, wrongly marked.
        sent_only = all(s.status == "sent" for s in settlements)
        try:
            return await self._db.write(settle, redoable=sent_only)
        except StoreUnavailable:
            # Left ``sending``, a row holds its chat's later replies until a restart (one
            # process: no lease hands it on, as on PostgreSQL): record what happened as soon
            # as a write commits again, ahead of that write.
            self._db.defer_write(f"settle:{','.join(str(s.id) for s in settlements)}", settle)
            raise

    async def unconfirmed_for_chat(self, platform: str, chat_id: str) -> list[OutboxRow]:
        return await self._db.read(lambda c: unconfirmed_for_chat(c, platform, chat_id))

    async def unconfirmed_page(
        self, platform: str, chat_id: str, after_id: int, limit: int
    ) -> list[OutboxRow]:
        return await self._db.read(lambda c: unconfirmed_for_chat(c, platform, chat_id, after_id, limit))

    async def confirm_outbox(self, platform: str, chat_id: str, row_id: int) -> bool:
        now = time.time()
        return await self._db.write(lambda c: confirm_outbox(c, platform, chat_id, row_id, now))

    async def undelivered(self, now: float, stuck_after: float, most: int) -> Undelivered:
        return await self._db.read(lambda c: undelivered(c, now, stuck_after, most))

    async def hold_chat_route(self, platform: str, chat_id: str) -> int:
        """One process delivers everything on SQLite: there is no other route to move (the
        store is still asked, so a closed one says so, as every call does)."""
        return await self._db.read(lambda c: 0)

    outbox_status = reads(outbox_status)
    undelivered_in_chat = reads(undelivered_in_chat)

    async def enqueue_outbox(self, drafts: Sequence[OutboxDraft]) -> None:
        if not drafts:
            return
        now = time.time()
        items = list(drafts)

        def write(c: sqlite3.Connection) -> None:
            for draft in items:
                insert_outbox(c, draft, now)

        await self._db.write(write)


def undelivered(conn: sqlite3.Connection, now: float, stuck_after: float, most: int) -> Undelivered:
    count, oldest = conn.execute(
        "SELECT COUNT(*), MIN(created_at) FROM outbox WHERE status IN ('pending', 'sending', 'ambiguous')"
    ).fetchone()
    where = STUCK_WHERE.format(cutoff="?", now="?")
    rows = conn.execute(
        f"SELECT {STUCK.format(holder='NULL')} FROM outbox o {OPEN_ROWS} WHERE {where} ORDER BY o.id LIMIT ?",
        (now - stuck_after, now, most),
    ).fetchall()
    return Undelivered(int(count), oldest, tuple(stuck_reply(r) for r in rows))
