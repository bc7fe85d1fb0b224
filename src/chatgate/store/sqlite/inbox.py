"""The inbox role over SQLite: admission's one transaction, and what the inbox reports.

``admit`` commits the event together with everything admission decided about it: the
session row (created, or its latest source), the chat's labels, a command's cancellations
and reset, an approval answer's resolution, and the reply. Write functions are pure
functions of the database and their arguments (``now`` is taken before queueing).
"""

from __future__ import annotations

import sqlite3
import time

from chatgate.domain.approvals import ApprovalResolution
from chatgate.domain.edits import edit_target
from chatgate.domain.errors import ScopeConflict
from chatgate.domain.inbox import AdmitRequest, AdmitResult, QueueStats, RejectedInbound
from chatgate.domain.source import Source
from chatgate.store.admission_rules import reply_of
from chatgate.store.codec import amended, dumps, new_session_id
from chatgate.store.sqlite import approvals
from chatgate.store.sqlite.claims import claim_admitted
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads
from chatgate.store.sqlite.labels import observe_labels
from chatgate.store.sqlite.outbox import insert_outbox
from chatgate.store.sqlite.plans import QUEUED_ROWS


def _insert_event(conn: sqlite3.Connection, req: AdmitRequest, inbound_json: str, now: float) -> int | None:
    """The new row's ``seq``, or None when this (transport, delivery id) was admitted before."""
    inbound = req.inbound
    row = conn.execute(
        "INSERT INTO inbox (transport, delivery_id, session_key, status, inbound_json,"
        " admitted_at, finished_at, outcome) VALUES (?,?,?,?,?,?,?,?)"
        " ON CONFLICT (transport, delivery_id) DO NOTHING RETURNING seq",
        (
            inbound.transport,
            inbound.delivery_id,
            req.session_key,
            "queued" if req.queued else "done",
            inbound_json,
            now,
            None if req.queued else now,
            None if req.queued else "command",
        ),
    ).fetchone()
    return None if row is None else int(row[0])


def _amend_waiting(conn: sqlite3.Connection, req: AdmitRequest, seq: int, now: float) -> bool:
    """An edit of a message of this session that no turn has taken yet replaces that message's
    text, and the edit (kept, so a redelivery is still a duplicate) is done: the agent reads the
    message once, as it now reads. An edit of a message already answered stays an event."""
    target = edit_target(req.inbound)
    if target is None or not req.queued:
        return False
    row = conn.execute(
        f"SELECT seq, inbound_json FROM inbox {QUEUED_ROWS} WHERE session_key = ? AND status = 'queued'"
        " AND claimed_by IS NULL AND seq < ? AND json_extract(inbound_json, '$.message_ref') = ?"
        " ORDER BY seq DESC LIMIT 1",
        (req.session_key, seq, target),
    ).fetchone()
    if row is None:
        return False
    conn.execute("UPDATE inbox SET inbound_json = ? WHERE seq = ?", (amended(row[1], req), row[0]))
    conn.execute(
        "UPDATE inbox SET status = 'done', finished_at = ?, outcome = 'amended' WHERE seq = ?", (now, seq)
    )
    return True


def _touch_session(conn: sqlite3.Connection, key: str, source: Source, source_json: str, now: float) -> None:
    """A session keeps the scope of its first message: another scope's event for the same key
    raises ``ScopeConflict`` (and its transaction rolls back), so two workspaces never share one."""
    updated = conn.execute(
        "UPDATE sessions SET source_json = ?, last_activity = ? WHERE key = ?"
        " AND coalesce(json_extract(source_json, '$.scope_id'), '') = ?",
        (source_json, now, key, source.scope_id or ""),
    ).rowcount
    if not updated:
        if conn.execute("SELECT 1 FROM sessions WHERE key = ?", (key,)).fetchone():
            raise ScopeConflict(key)
        conn.execute(
            "INSERT INTO sessions (key, session_id, platform, chat_id, source_json, created_at,"
            " last_activity) VALUES (?,?,?,?,?,?,?)",
            (key, new_session_id(), source.platform, source.chat_id, source_json, now, now),
        )


def _cancel_queued(conn: sqlite3.Connection, req: AdmitRequest, now: float) -> tuple[int, int]:
    """``/stop`` and ``/new``: (items cancelled, of which waiting). Only messages no turn
    has picked up count as waiting; a running one is stopped, not dropped."""
    waiting = conn.execute(
        f"SELECT COUNT(*) FROM inbox {QUEUED_ROWS} WHERE session_key = ? AND status = 'queued'"
        " AND claimed_by IS NULL",
        (req.session_key,),
    ).fetchone()[0]
    cancelled = conn.execute(
        f"UPDATE inbox {QUEUED_ROWS} SET status = 'cancelled', finished_at = ?, outcome = ?"
        " WHERE session_key = ? AND status = 'queued'",
        (now, f"cancelled by {req.inbound.text.strip()[:40]}", req.session_key),
    ).rowcount
    conn.execute("UPDATE sessions SET retry_at = NULL, last_error = NULL WHERE key = ?", (req.session_key,))
    return cancelled, int(waiting)


def _answer(conn: sqlite3.Connection, req: AdmitRequest, now: float) -> ApprovalResolution | None:
    """An approval answer commits with the event that carried it, so a redelivery resolves nothing."""
    if req.answer is None:
        return None
    a = req.answer.recorded(waiting_elsewhere=False)  # one process per SQLite store: no elsewhere
    return approvals.resolve_approval(
        conn, a.prompt_id, a.outcome, a.tier, a.by_id, a.by_name, now, reason=a.reason
    )


def admit(conn: sqlite3.Connection, req: AdmitRequest, now: float) -> AdmitResult:
    inbound = req.inbound
    inbound_dict = inbound.to_dict()
    seq = _insert_event(conn, req, dumps(inbound_dict), now)
    if seq is None:
        first, key = conn.execute(
            "SELECT seq, session_key FROM inbox WHERE transport = ? AND delivery_id = ?",
            (inbound.transport, inbound.delivery_id),
        ).fetchone()
        return AdmitResult(new=False, seq=first, session_key=key)
    source = inbound.source
    _touch_session(conn, req.session_key, source, dumps(inbound_dict["source"]), now)
    if source.chat_id and inbound.labels_observed():
        observe_labels(conn, source, seq)
    _amend_waiting(conn, req, seq, now)
    cancelled, waiting = _cancel_queued(conn, req, now) if req.cancel_queued else (0, 0)
    if req.reset_session:
        conn.execute("UPDATE sessions SET session_id = ? WHERE key = ?", (new_session_id(), req.session_key))
    resolution = _answer(conn, req, now)
    reply = reply_of(req, waiting, resolution)
    if reply is not None:
        insert_outbox(conn, reply, now)
    claim = claim_admitted(conn, req.session_key, req.claim, now) if req.claim and req.queued else None
    return AdmitResult(
        new=True,
        seq=seq,
        session_key=req.session_key,
        cancelled=cancelled,
        resolution=resolution,
        claim=claim,
    )


def cancel_running(conn: sqlite3.Connection, session_key: str, reason: str, now: float) -> int:
    return conn.execute(
        f"UPDATE inbox {QUEUED_ROWS} SET status = 'cancelled', finished_at = ?, outcome = ?"
        " WHERE session_key = ? AND status = 'queued' AND claimed_by IS NOT NULL",
        (now, reason[:80], session_key),
    ).rowcount


REJECTED_KEPT = 10_000
"""How many rejected deliveries the log keeps (at most ~10 MB: reason and excerpt are capped)."""


def record_rejected(
    conn: sqlite3.Connection, transport: str, delivery_id: str | None, reason: str, excerpt: str, now: float
) -> None:
    conn.execute(
        "INSERT INTO rejected_inbound (transport, delivery_id, reason, excerpt, received_at)"
        " VALUES (?,?,?,?,?)",
        (transport, delivery_id, reason[:500], excerpt[:500], now),
    )
    # Strangers can make us write here (every refused message is recorded): keep the newest only.
    conn.execute(
        "DELETE FROM rejected_inbound WHERE id <= (SELECT MAX(id) FROM rejected_inbound) - ?",
        (REJECTED_KEPT,),
    )


def rejected(conn: sqlite3.Connection, limit: int = 100) -> list[RejectedInbound]:
    rows = conn.execute(
        "SELECT transport, delivery_id, reason, excerpt, received_at FROM rejected_inbound"
        " ORDER BY id DESC LIMIT ?",
        (limit,),
    ).fetchall()
    return [RejectedInbound(*row) for row in rows]


def queue_depth(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM inbox WHERE status = 'queued'").fetchone()[0])


def queue_stats(conn: sqlite3.Connection) -> QueueStats:
    depth, oldest = conn.execute(
        "SELECT COUNT(*), MIN(admitted_at) FROM inbox WHERE status = 'queued'"
    ).fetchone()
    row = conn.execute(
        "SELECT last_error FROM sessions WHERE last_error IS NOT NULL ORDER BY last_activity DESC LIMIT 1"
    ).fetchone()
    return QueueStats(int(depth), oldest, row[0] if row else None)


class SqliteInbox(SqliteRole):
    """``Inbox``, with its ``Rejections``."""

    claims_on_admit = True

    async def admit(self, request: AdmitRequest) -> AdmitResult:
        now = time.time()

        def admit_and_claim(conn: sqlite3.Connection) -> AdmitResult:
            result = admit(conn, request, now)
            if result.claim is not None:  # a release still deferred for it must not undo this claim
                self._db.forget_deferred(result.session_key)
            return result

        # A replayable plain message (``AdmitRequest.relaxed``) needs no fsync of its own.
        return await self._db.write(admit_and_claim, redoable=request.relaxed)

    async def make_durable(self) -> None:
        await self._db.sync()

    async def cancel_running(self, session_key: str, reason: str) -> int:
        now = time.time()
        return await self._db.write(lambda c: cancel_running(c, session_key, reason, now))

    async def record_rejected(
        self, transport: str, delivery_id: str | None, reason: str, excerpt: str
    ) -> None:
        now = time.time()
        await self._db.write(lambda c: record_rejected(c, transport, delivery_id, reason, excerpt, now))

    rejected = reads(rejected)
    queue_depth = reads(queue_depth)
    queue_stats = reads(queue_stats)
