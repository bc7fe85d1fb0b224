"""The inbox role over PostgreSQL: admission's one transaction, and what the inbox reports.

``admit`` locks the session row before it inserts the event, so the events of one
session get their ``seq`` in the order their admissions commit (an identity column
alone is not commit-ordered: two transactions may commit in the other order than they
took their numbers). A redelivery is found by ``INSERT … ON CONFLICT DO NOTHING
RETURNING``: a concurrent admission of the same delivery waits for the first to commit
and then inserts nothing.
"""

from __future__ import annotations

import time

import asyncpg

from chatgate.domain.approvals import ApprovalResolution
from chatgate.domain.edits import edit_target
from chatgate.domain.errors import ScopeConflict
from chatgate.domain.inbox import AdmitRequest, AdmitResult, QueueStats, RejectedInbound
from chatgate.store.admission_rules import reply_of
from chatgate.store.codec import amended, dumps, new_session_id
from chatgate.store.postgres import approvals
from chatgate.store.postgres.admission import AdmissionQueue
from chatgate.store.postgres.database import PgDatabase, PgRole
from chatgate.store.postgres.forwards import reads
from chatgate.store.postgres.labels import observe_labels
from chatgate.store.postgres.outbox import insert_outbox
from chatgate.store.postgres.sql import NOTIFY, NOW, rowcount


async def _lock_session(
    conn: asyncpg.Connection, req: AdmitRequest, source_json: str, now: float, holder: str
) -> None:
    """Lock the session row (creating it), so this admission's seq is the session's next.

    A client's event moves the session's route to ``holder``; the gateway's own (a schedule
    firing, a task's events) gives ``holder`` only to a session without one. A session keeps
    the scope of its first message: another scope's event for the same key raises
    ``ScopeConflict`` (and the transaction rolls back)."""
    source = req.inbound.source
    scope = source.scope_id or ""
    # One statement: create the row, or update (and so lock) it while its scope matches.
    # A conflicting row of another scope is locked too but not updated: nothing comes back.
    bound = await conn.fetchval(
        "INSERT INTO sessions AS s (key, session_id, platform, chat_id, source_json, scope, created_at,"
        " last_activity, route_holder) VALUES ($1,$2,$3,$4,$5,$6,$7,$7,$8) ON CONFLICT (key) DO UPDATE"
        " SET source_json = excluded.source_json, last_activity = excluded.last_activity,"
        " route_holder = CASE WHEN $9 THEN excluded.route_holder"
        " ELSE COALESCE(s.route_holder, excluded.route_holder) END"
        " WHERE s.scope = excluded.scope RETURNING s.scope",
        req.session_key,
        new_session_id(),
        source.platform,
        source.chat_id,
        source_json,
        scope,
        now,
        holder,
        req.from_a_client,
    )
    if bound is None:
        raise ScopeConflict(req.session_key)


async def _insert_event(
    conn: asyncpg.Connection, req: AdmitRequest, inbound_json: str, now: float
) -> int | None:
    """The new row's ``seq``, or None when this (transport, delivery id) was admitted before."""
    inbound = req.inbound
    seq = await conn.fetchval(
        "INSERT INTO inbox (transport, delivery_id, session_key, status, inbound_json,"
        " admitted_at, finished_at, outcome) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)"
        " ON CONFLICT (transport, delivery_id) DO NOTHING RETURNING seq",
        inbound.transport,
        inbound.delivery_id,
        req.session_key,
        "queued" if req.queued else "done",
        inbound_json,
        now,
        None if req.queued else now,
        None if req.queued else "command",
    )
    return None if seq is None else int(seq)


async def _cancel_queued(conn: asyncpg.Connection, req: AdmitRequest, now: float) -> tuple[int, int]:
    """``/stop`` and ``/new``: (items cancelled, of which waiting)."""
    waiting = await conn.fetchval(
        "SELECT COUNT(*) FROM inbox WHERE session_key = $1 AND status = 'queued' AND claimed_by IS NULL",
        req.session_key,
    )
    cancelled = await conn.execute(
        "UPDATE inbox SET status = 'cancelled', finished_at = $1, outcome = $2"
        " WHERE session_key = $3 AND status = 'queued'",
        now,
        f"cancelled by {req.inbound.text.strip()[:40]}",
        req.session_key,
    )
    await conn.execute(
        "UPDATE sessions SET retry_at = NULL, last_error = NULL WHERE key = $1", req.session_key
    )
    return rowcount(cancelled), int(waiting)


async def _waiting_elsewhere(conn: asyncpg.Connection, prompt_id: str, holder: str) -> bool:
    """Whether a live peer leases the prompt's session: its turn there waits for the answer
    (it is woken by the ``approval:<id>`` notice)."""
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM approvals a JOIN sessions s ON s.key = a.session_key"
            " JOIN processes p ON p.holder = s.lease_holder WHERE a.prompt_id = $1"
            f" AND s.lease_owner IS NOT NULL AND s.lease_holder <> $2 AND s.lease_expires >= {NOW})",
            prompt_id,
            holder,
        )
    )


async def _answer(
    conn: asyncpg.Connection, req: AdmitRequest, now: float, holder: str
) -> ApprovalResolution | None:
    if req.answer is None:
        return None
    a = req.answer
    a = a.recorded(not a.waiting_here and await _waiting_elsewhere(conn, a.prompt_id, holder))
    return await approvals.resolve_approval(
        conn, a.prompt_id, a.outcome, a.tier, a.by_id, a.by_name, now, reason=a.reason
    )


async def _amend_waiting(conn: asyncpg.Connection, req: AdmitRequest, seq: int, now: float) -> bool:
    """As the SQLite backend's: an edit of a message no turn has taken yet replaces its text."""
    target = edit_target(req.inbound)
    if target is None or not req.queued:
        return False
    row = await conn.fetchrow(
        "SELECT seq, inbound_json FROM inbox WHERE session_key = $1 AND status = 'queued'"
        " AND claimed_by IS NULL AND seq < $2 AND (inbound_json::jsonb ->> 'message_ref') = $3"
        " ORDER BY seq DESC LIMIT 1 FOR UPDATE",
        req.session_key,
        seq,
        target,
    )
    if row is None:
        return False
    await conn.execute("UPDATE inbox SET inbound_json = $1 WHERE seq = $2", amended(row[1], req), row[0])
    await conn.execute(
        "UPDATE inbox SET status = 'done', finished_at = $1, outcome = 'amended' WHERE seq = $2", now, seq
    )
    return True


async def _admitted_before(conn: asyncpg.Connection, req: AdmitRequest) -> AdmitResult | None:
    row = await conn.fetchrow(
        "SELECT seq, session_key FROM inbox WHERE transport = $1 AND delivery_id = $2",
        req.inbound.transport,
        req.inbound.delivery_id,
    )
    return None if row is None else AdmitResult(new=False, seq=row[0], session_key=row[1])


async def _notify(conn: asyncpg.Connection, notices: set[str] | None, payload: str) -> None:
    """Send ``payload`` to the fleet at commit; a batch (``notices``) sends each payload once."""
    if notices is None:
        await conn.execute(NOTIFY, payload)
    else:
        notices.add(payload)


async def admit(
    conn: asyncpg.Connection, req: AdmitRequest, now: float, holder: str, notices: set[str] | None = None
) -> AdmitResult:
    """The admission; a client's event says the session's chat is reachable through ``holder``
    (it received the event), so the chat's replies are delivered by it while it lives
    (``outbox.claim_outbox``). The gateway's own events (``AdmitRequest.from_a_client`` false)
    leave an existing route alone."""
    before = await _admitted_before(conn, req)
    if before is not None:
        if req.from_a_client:  # a redelivery arrives where the client is now (it reconnected)
            await conn.execute(
                "UPDATE sessions SET route_holder = $1 WHERE key = $2", holder, before.session_key
            )
        return before
    inbound = req.inbound
    inbound_dict = inbound.to_dict()
    source = inbound.source
    await _lock_session(conn, req, dumps(inbound_dict["source"]), now, holder)
    seq = await _insert_event(conn, req, dumps(inbound_dict), now)
    if seq is None:  # a concurrent admission of this delivery committed first
        raced = await _admitted_before(conn, req)
        assert raced is not None
        return raced
    if source.chat_id and inbound.labels_observed():
        await observe_labels(conn, source, seq)
    await _amend_waiting(conn, req, seq, now)
    cancelled, waiting = await _cancel_queued(conn, req, now) if req.cancel_queued else (0, 0)
    if req.queued:
        await _notify(conn, notices, "inbox")
    if cancelled > waiting:  # a turn is running on some process: it stops, wherever it runs
        await _notify(conn, notices, f"stop:{req.session_key}")
    if req.reset_session:
        await conn.execute(
            "UPDATE sessions SET session_id = $1 WHERE key = $2", new_session_id(), req.session_key
        )
    resolution = await _answer(conn, req, now, holder)
    reply = reply_of(req, waiting, resolution)
    if reply is not None:
        await insert_outbox(conn, reply, now)
    return AdmitResult(
        new=True, seq=seq, session_key=req.session_key, cancelled=cancelled, resolution=resolution
    )


async def cancel_running(conn: asyncpg.Connection, session_key: str, reason: str, now: float) -> int:
    status = await conn.execute(
        "UPDATE inbox SET status = 'cancelled', finished_at = $1, outcome = $2"
        " WHERE session_key = $3 AND status = 'queued' AND claimed_by IS NOT NULL",
        now,
        reason[:80],
        session_key,
    )
    if rowcount(status):
        await conn.execute(NOTIFY, f"stop:{session_key}")
    return rowcount(status)


REJECTED_KEPT = 10_000
"""How many rejected deliveries the log keeps (reason and excerpt are capped)."""


async def record_rejected(
    conn: asyncpg.Connection, transport: str, delivery_id: str | None, reason: str, excerpt: str, now: float
) -> None:
    newest = await conn.fetchval(
        "INSERT INTO rejected_inbound (transport, delivery_id, reason, excerpt, received_at)"
        " VALUES ($1,$2,$3,$4,$5) RETURNING id",
        transport,
        delivery_id,
        reason[:500],
        excerpt[:500],
        now,
    )
    # Strangers can make us write here (every refused message is recorded): keep the newest only.
    await conn.execute("DELETE FROM rejected_inbound WHERE id <= $1", int(newest) - REJECTED_KEPT)


async def rejected(conn: asyncpg.Connection, limit: int = 100) -> list[RejectedInbound]:
    rows = await conn.fetch(
        "SELECT transport, delivery_id, reason, excerpt, received_at FROM rejected_inbound"
        " ORDER BY id DESC LIMIT $1",
        limit,
    )
    return [RejectedInbound(*row) for row in rows]


async def queue_depth(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT COUNT(*) FROM inbox WHERE status = 'queued'"))


async def queue_stats(conn: asyncpg.Connection) -> QueueStats:
    row = await conn.fetchrow("SELECT COUNT(*), MIN(admitted_at) FROM inbox WHERE status = 'queued'")
    error = await conn.fetchval(
        "SELECT last_error FROM sessions WHERE last_error IS NOT NULL ORDER BY last_activity DESC LIMIT 1"
    )
    assert row is not None
    return QueueStats(int(row[0]), row[1], error)


class PgInbox(PgRole):
    """``Inbox``, with its ``Rejections``. Admissions that queue up commit together
    (``admission.AdmissionQueue``). They claim no session: the claim loop does (its claim
    reaps dead peers and locks with ``SKIP LOCKED``, which a shared batch cannot)."""

    claims_on_admit = False

    def __init__(self, db: PgDatabase) -> None:
        super().__init__(db)
        self._admissions = AdmissionQueue(db, admit)

    async def admit(self, request: AdmitRequest) -> AdmitResult:
        return await self._admissions.admit(request)

    async def make_durable(self) -> None:
        """Every admission was durable when ``admit`` returned (PostgreSQL has no relaxed commit)."""
        self._db.require_open()

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
