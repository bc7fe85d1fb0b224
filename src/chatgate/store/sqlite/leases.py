"""The leases role over SQLite: claims in admission order, renewals, and the statements of a
turn's commit, abandon and resume, whose rules are ``store.turn_rules``.

A session is worked on only by the owner of its lease (``sessions.lease_owner``). Write
functions are pure functions of the database and their arguments (``now`` is taken before
queueing), so a batch the writer runs again after a rollback writes the same.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.history import HistoryEntry
from chatgate.domain.outbox import OutboxDraft, OutboxRow
from chatgate.domain.turns import Claim, TurnCommit, TurnOutcome
from chatgate.store import turn_rules
from chatgate.store.inline import run_inline
from chatgate.store.sqlite.claims import claim_sessions, take_batch
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import writes
from chatgate.store.sqlite.outbox import insert_claimed, insert_outbox
from chatgate.store.sqlite.plans import QUEUED_ROWS
from chatgate.store.sqlite.tasks import TaskSql
from chatgate.store.sqlite.transcript import append_transcript
from chatgate.store.turn_rules import CompletesTurns, TurnStatements


def renew_lease(conn: sqlite3.Connection, key: str, owner: str, lease_s: float, now: float) -> bool:
    return (
        conn.execute(
            "UPDATE sessions SET lease_expires = ? WHERE key = ? AND lease_owner = ?",
            (now + lease_s, key, owner),
        ).rowcount
        == 1
    )


class TurnSql(TurnStatements):
    """``TurnStatements`` on the writer's connection (each completes at once: see ``run_inline``).
    One process per file: a queued item of a session this owner leases is this owner's."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._c = conn

    async def leased_session_id(self, session_key: str, owner: str) -> str | None:
        sql = "SELECT session_id FROM sessions WHERE key = ? AND lease_owner = ?"
        row = self._c.execute(sql, (session_key, owner)).fetchone()
        return None if row is None else str(row[0])

    async def items_held(self, seqs: tuple[int, ...], owner: str) -> int:
        marks = ",".join("?" * len(seqs))
        sql = f"SELECT COUNT(*) FROM inbox WHERE seq IN ({marks}) AND status = 'queued'"
        return int(self._c.execute(sql, seqs).fetchone()[0])

    async def mark_done(self, seqs: tuple[int, ...], outcome: str, now: float) -> None:
        self._c.executemany(
            "UPDATE inbox SET status = 'done', finished_at = ?, outcome = ? WHERE seq = ?",
            [(now, outcome, seq) for seq in seqs],
        )

    async def append_transcript(
        self, session_id: str, session_key: str, entries: Sequence[HistoryEntry], now: float
    ) -> None:
        append_transcript(self._c, session_id, session_key, entries, now)

    def tasks(self) -> TaskSql:
        return TaskSql(self._c)

    async def insert_claimed(self, draft: OutboxDraft, now: float) -> OutboxRow | None:
        return insert_claimed(self._c, draft, now)

    async def insert_outbox(self, draft: OutboxDraft, now: float) -> None:
        insert_outbox(self._c, draft, now)

    async def renew_after_turn(self, session_key: str, now: float, lease_s: float) -> None:
        self._c.execute(
            "UPDATE sessions SET last_activity = ?, retry_at = NULL, last_error = NULL,"
            " preview_message_id = NULL, lease_expires = ? WHERE key = ?",
            (now, now + lease_s, session_key),
        )

    async def take_batch(self, session_key: str, session_id: str, batch: int, owner: str) -> Claim | None:
        return take_batch(self._c, session_key, session_id, batch, owner)

    async def release_lease(self, session_key: str) -> None:
        sql = "UPDATE sessions SET lease_owner = NULL, lease_expires = NULL WHERE key = ?"
        self._c.execute(sql, (session_key,))

    async def give_back(self, session_key: str, owner: str, seqs: tuple[int, ...]) -> None:
        self._c.executemany(
            "UPDATE inbox SET attempts = MAX(attempts - 1, 0), claimed_by = NULL, isolated = 0"
            " WHERE seq = ? AND status = 'queued'",
            [(s,) for s in seqs],
        )
        self._c.execute(
            f"UPDATE inbox {QUEUED_ROWS} SET attempts = MAX(attempts - 1, 0), claimed_by = NULL,"
            " isolated = 0 WHERE session_key = ? AND claimed_by = ? AND status = 'queued'",
            (session_key, owner),
        )

    async def release_for_retry(
        self, session_key: str, owner: str, retry_at: float | None, error: str | None
    ) -> None:
        self._c.execute(
            "UPDATE sessions SET lease_owner = NULL, lease_expires = NULL, retry_at = ?,"
            " preview_message_id = NULL,"
            " last_error = COALESCE(?, last_error) WHERE key = ? AND lease_owner = ?",
            (retry_at, error, session_key, owner),
        )

    async def set_preview(self, owner: str, session_key: str, message_id: str | None) -> bool:
        return record_preview(self._c, owner, session_key, message_id)


def record_preview(conn: sqlite3.Connection, owner: str, session_key: str, message_id: str | None) -> bool:
    return (
        conn.execute(
            "UPDATE sessions SET preview_message_id = ? WHERE key = ? AND lease_owner = ?",
            (message_id, session_key, owner),
        ).rowcount
        == 1
    )


def release_dead_owners(conn: sqlite3.Connection, owner: str) -> int:
    """Single-process store: whatever another owner leased, it leased before it died.

    An item the dead owner ran isolated (the one suspect running) had its death blamed on it.
    """
    conn.execute(
        "UPDATE inbox SET crashes = crashes + 1 WHERE status = 'queued' AND isolated = 1"
        " AND claimed_by IS NOT NULL AND claimed_by != ?",
        (owner,),
    )
    released = conn.execute(
        "UPDATE sessions SET lease_owner = NULL, lease_expires = NULL"
        " WHERE lease_owner IS NOT NULL AND lease_owner != ?",
        (owner,),
    ).rowcount
    conn.execute(
        "UPDATE inbox SET claimed_by = NULL, isolated = 0 WHERE status = 'queued' AND claimed_by IS NOT NULL"
        " AND claimed_by != ?",
        (owner,),
    )
    return released


class SqliteLeases(SqliteRole, CompletesTurns):
    """``Leases``: every method is a write through the group-commit writer."""

    async def claim_sessions(
        self, owner: str, limit: int, lease_seconds: float, batch: int, isolated: int = 1
    ) -> list[Claim]:
        now = time.time()

        def claim(conn: sqlite3.Connection) -> list[Claim]:
            claims = claim_sessions(conn, owner, limit, lease_seconds, batch, now, isolated)
            for taken in claims:  # a release still deferred for it must not undo this claim
                self._db.forget_deferred(taken.session_key)
            return claims

        # Redoable: after a power cut the session is unclaimed again and recovery claims it anew.
        return await self._db.write(claim, redoable=True)

    record_preview = writes(record_preview)

    async def record_notices(self, owner: str, session_key: str, notices: Sequence[OutboxDraft]) -> bool:
        now = time.time()
        return await self._db.write(
            lambda c: run_inline(turn_rules.record_notices(TurnSql(c), owner, session_key, notices, now))
        )

    async def renew_lease(self, session_key: str, owner: str, lease_seconds: float) -> bool:
        now = time.time()
        return await self._db.write(
            lambda c: renew_lease(c, session_key, owner, lease_seconds, now), redoable=True
        )

    async def commit_turn(
        self, owner: str, outcome: TurnOutcome, lease_seconds: float, batch: int, send_room: int
    ) -> TurnCommit:
        now = time.time()
        # The rows it claims are durable before they are sent: a turn's commit is never redoable.
        return await turn_rules.committed_then_logged(
            lambda finished: self._db.write(
                lambda c: run_inline(
                    turn_rules.commit_turn(
                        TurnSql(c), owner, outcome, lease_seconds, batch, now, send_room, finished
                    )
                )
            )
        )

    async def abandon_turn(
        self,
        owner: str,
        session_key: str,
        item_seqs: tuple[int, ...],
        retry_at: float | None,
        error: str | None,
    ) -> None:
        def release(conn: sqlite3.Connection) -> None:
            run_inline(turn_rules.abandon_turn(TurnSql(conn), owner, session_key, item_seqs, retry_at, error))

        try:
            await self._db.write(release)
        except StoreUnavailable:
            # A full disk fails the turn's commit and then its release: hand the session back
            # as soon as a write commits again, instead of when its lease runs out.
            self._db.defer_write(session_key, release)
            raise
