"""The SQL of the SQLite backend, as plain functions of a connection.

Write functions run inside the group-commit transaction; they must be pure
functions of the database so that re-running one after a rolled-back batch is
safe. Read functions run on reader threads.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import replace
from typing import Any

from chatgate.domain.approvals import ApprovalResolution
from chatgate.domain.errors import LeaseLost
from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbound import Inbound
from chatgate.domain.inbox import AdmitRequest, AdmitResult
from chatgate.domain.outbox import OutboxDraft, OutboxRow, OutboxSettlement
from chatgate.domain.sessions import SessionInfo
from chatgate.domain.turns import Claim, QueuedItem, TurnOutcome

_OUTBOX_COLUMNS = (
    "id, idem_key, platform, chat_id, session_key, kind, text, in_reply_to, status, "
    "attempts, possibly_duplicate, platform_message_id, created_at, target_json"
)


def new_session_id() -> str:
    return time.strftime("%Y%m%d_%H%M%S_", time.gmtime()) + uuid.uuid4().hex[:8]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def outbox_row(row: tuple[Any, ...]) -> OutboxRow:
    return OutboxRow(
        id=row[0],
        idem_key=row[1],
        platform=row[2],
        chat_id=row[3],
        session_key=row[4],
        kind=row[5],
        text=row[6],
        in_reply_to=row[7],
        status=row[8],
        attempts=row[9],
        possibly_duplicate=bool(row[10]),
        platform_message_id=row[11],
        created_at=row[12],
        target=json.loads(row[13]),
    )


def insert_outbox(conn: sqlite3.Connection, draft: OutboxDraft, now: float) -> None:
    conn.execute(
        "INSERT INTO outbox (idem_key, platform, chat_id, session_key, kind, text, in_reply_to,"
        " target_json, status, created_at) VALUES (?,?,?,?,?,?,?,?, 'pending', ?)"
        " ON CONFLICT (idem_key) DO NOTHING",
        (
            draft.idem_key,
            draft.platform,
            draft.chat_id,
            draft.session_key,
            draft.kind,
            draft.text,
            draft.in_reply_to,
            _dumps(draft.target),
            now,
        ),
    )


# ---------------------------------------------------------------- admission


def admit(conn: sqlite3.Connection, req: AdmitRequest, now: float) -> AdmitResult:
    inbound = req.inbound
    inbound_dict = inbound.to_dict()
    row = conn.execute(
        "INSERT INTO inbox (transport, delivery_id, session_key, status, inbound_json,"
        " admitted_at, finished_at, outcome) VALUES (?,?,?,?,?,?,?,?)"
        " ON CONFLICT (transport, delivery_id) DO NOTHING RETURNING seq",
        (
            inbound.transport,
            inbound.delivery_id,
            req.session_key,
            "queued" if req.queued else "done",
            _dumps(inbound_dict),
            now,
            None if req.queued else now,
            None if req.queued else "command",
        ),
    ).fetchone()
    if row is None:
        seq, key = conn.execute(
            "SELECT seq, session_key FROM inbox WHERE transport = ? AND delivery_id = ?",
            (inbound.transport, inbound.delivery_id),
        ).fetchone()
        return AdmitResult(new=False, seq=seq, session_key=key)
    seq = row[0]
    source = inbound.source
    source_json = _dumps(inbound_dict["source"])
    updated = conn.execute(
        "UPDATE sessions SET source_json = ?, last_activity = ? WHERE key = ?",
        (source_json, now, req.session_key),
    ).rowcount
    if not updated:
        conn.execute(
            "INSERT INTO sessions (key, session_id, platform, chat_id, source_json, created_at,"
            " last_activity) VALUES (?,?,?,?,?,?,?)",
            (req.session_key, new_session_id(), source.platform, source.chat_id, source_json, now, now),
        )
    if source.chat_id and inbound.labels_observed():
        conn.execute(
            "INSERT INTO chat_labels (platform, scope, chat_id, chat_name, chat_topic,"
            " observed_seq) VALUES (?,?,?,?,?,?) ON CONFLICT (platform, scope, chat_id)"
            " DO UPDATE SET chat_name = excluded.chat_name, chat_topic = excluded.chat_topic,"
            " observed_seq = excluded.observed_seq WHERE excluded.observed_seq > observed_seq",
            (
                source.platform,
                source.scope_id or "",
                source.chat_id,
                source.chat_name,
                source.chat_topic,
                seq,
            ),
        )
    cancelled = waiting = 0
    if req.cancel_queued:
        # Only messages no turn has picked up count as "waiting"; a running one is stopped, not dropped.
        waiting = conn.execute(
            "SELECT COUNT(*) FROM inbox WHERE session_key = ? AND status = 'queued' AND claimed_by IS NULL",
            (req.session_key,),
        ).fetchone()[0]
        cancelled = conn.execute(
            "UPDATE inbox SET status = 'cancelled', finished_at = ?, outcome = ?"
            " WHERE session_key = ? AND status = 'queued'",
            (now, f"cancelled by {inbound.text.strip()[:40]}", req.session_key),
        ).rowcount
        conn.execute(
            "UPDATE sessions SET retry_at = NULL, last_error = NULL WHERE key = ?",
            (req.session_key,),
        )
    if req.reset_session:
        conn.execute("UPDATE sessions SET session_id = ? WHERE key = ?", (new_session_id(), req.session_key))
    resolution = _answer(conn, req, now)
    if req.reply is not None:
        reply = req.reply
        if req.cancel_queued:
            reply = replace(reply, text=reply.text.replace("{cancelled}", str(waiting)))
        if resolution is not None and req.answer is not None and req.answer.render is not None:
            reply = replace(reply, text=req.answer.render(resolution))
        insert_outbox(conn, reply, now)
    return AdmitResult(
        new=True, seq=seq, session_key=req.session_key, cancelled=cancelled, resolution=resolution
    )


def _answer(conn: sqlite3.Connection, req: AdmitRequest, now: float) -> ApprovalResolution | None:
    """An approval answer commits with the event that carried it, so a redelivery resolves nothing."""
    if req.answer is None:
        return None
    from chatgate.store import sqlite_approvals  # it imports this module

    a = req.answer
    return sqlite_approvals.resolve(
        conn, a.prompt_id, a.outcome, a.tier, a.by_id, a.by_name, now, reason=a.reason
    )


# ---------------------------------------------------------------- scheduling


def _take_batch(conn: sqlite3.Connection, key: str, session_id: str, batch: int, owner: str) -> Claim | None:
    rows = conn.execute(
        "SELECT seq, inbound_json, attempts FROM inbox WHERE session_key = ? AND status = 'queued'"
        " ORDER BY seq LIMIT ?",
        (key, batch),
    ).fetchall()
    if not rows:
        return None
    seqs = [r[0] for r in rows]
    conn.executemany(
        "UPDATE inbox SET attempts = attempts + 1, claimed_by = ? WHERE seq = ?", [(owner, s) for s in seqs]
    )
    items = tuple(
        QueuedItem(seq=r[0], session_key=key, inbound=Inbound.from_dict(json.loads(r[1])), attempts=r[2] + 1)
        for r in rows
    )
    return Claim(session_key=key, session_id=session_id, items=items)


def claim_sessions(
    conn: sqlite3.Connection, owner: str, limit: int, lease_s: float, batch: int, now: float
) -> list[Claim]:
    candidates = conn.execute(
        "SELECT s.key, s.session_id FROM (SELECT session_key, MIN(seq) AS head FROM inbox"
        " WHERE status = 'queued' GROUP BY session_key) q JOIN sessions s ON s.key = q.session_key"
        " WHERE (s.lease_owner IS NULL OR s.lease_expires < ?)"
        " AND (s.retry_at IS NULL OR s.retry_at <= ?) ORDER BY q.head LIMIT ?",
        (now, now, limit),
    ).fetchall()
    claims: list[Claim] = []
    for key, session_id in candidates:
        conn.execute(
            "UPDATE sessions SET lease_owner = ?, lease_expires = ? WHERE key = ?",
            (owner, now + lease_s, key),
        )
        claim = _take_batch(conn, key, session_id, batch, owner)
        if claim is not None:
            claims.append(claim)
    return claims


def renew_lease(conn: sqlite3.Connection, key: str, owner: str, lease_s: float, now: float) -> bool:
    return (
        conn.execute(
            "UPDATE sessions SET lease_expires = ? WHERE key = ? AND lease_owner = ?",
            (now + lease_s, key, owner),
        ).rowcount
        == 1
    )


def complete_turn(
    conn: sqlite3.Connection, owner: str, out: TurnOutcome, lease_s: float, batch: int, now: float
) -> Claim | None:
    held = conn.execute(
        "SELECT session_id FROM sessions WHERE key = ? AND lease_owner = ?",
        (out.session_key, owner),
    ).fetchone()
    if held is None:
        raise LeaseLost(f"lease on {out.session_key} is no longer held by {owner}")
    marks = "?" * len(out.item_seqs)
    queued = conn.execute(
        f"SELECT COUNT(*) FROM inbox WHERE seq IN ({','.join(marks)}) AND status = 'queued'",
        out.item_seqs,
    ).fetchone()[0]
    if queued != len(out.item_seqs):
        raise LeaseLost(f"items of {out.session_key} were cancelled while the turn ran")
    conn.executemany(
        "UPDATE inbox SET status = 'done', finished_at = ?, outcome = ? WHERE seq = ?",
        [(now, out.outcome, seq) for seq in out.item_seqs],
    )
    conn.executemany(
        "INSERT INTO transcript (session_id, session_key, role, content, created_at) VALUES (?,?,?,?,?)",
        [(out.session_id, out.session_key, e.role, e.content, now) for e in out.transcript],
    )
    for draft in out.outbox:
        insert_outbox(conn, draft, now)
    conn.execute(
        "UPDATE sessions SET last_activity = ?, retry_at = NULL, last_error = NULL,"
        " lease_expires = ? WHERE key = ?",
        (now, now + lease_s, out.session_key),
    )
    claim = _take_batch(conn, out.session_key, held[0], batch, owner)
    if claim is None:
        conn.execute(
            "UPDATE sessions SET lease_owner = NULL, lease_expires = NULL WHERE key = ?",
            (out.session_key,),
        )
    return claim


def abandon_turn(
    conn: sqlite3.Connection,
    owner: str,
    key: str,
    seqs: tuple[int, ...],
    retry_at: float | None,
    error: str | None,
) -> None:
    held = conn.execute("SELECT 1 FROM sessions WHERE key = ? AND lease_owner = ?", (key, owner)).fetchone()
    if held is None:
        return  # a former owner: the session and its attempts belong to someone else now
    conn.executemany(
        "UPDATE inbox SET attempts = MAX(attempts - 1, 0), claimed_by = NULL"
        " WHERE seq = ? AND status = 'queued'",
        [(s,) for s in seqs],
    )
    conn.execute(
        "UPDATE sessions SET lease_owner = NULL, lease_expires = NULL, retry_at = ?,"
        " last_error = COALESCE(?, last_error) WHERE key = ? AND lease_owner = ?",
        (retry_at, error, key, owner),
    )


def recover(conn: sqlite3.Connection, owner: str) -> int:
    """Single-process store: whatever another owner leased, it leased before it died."""
    released = conn.execute(
        "UPDATE sessions SET lease_owner = NULL, lease_expires = NULL"
        " WHERE lease_owner IS NOT NULL AND lease_owner != ?",
        (owner,),
    ).rowcount
    conn.execute(
        "UPDATE inbox SET claimed_by = NULL WHERE status = 'queued' AND claimed_by IS NOT NULL"
        " AND claimed_by != ?",
        (owner,),
    )
    conn.execute(
        "UPDATE outbox SET status = 'pending', possibly_duplicate = 1, next_attempt_at = NULL"
        " WHERE status = 'sending'"
    )
    return released


# ---------------------------------------------------------------- outbox


def claim_outbox(conn: sqlite3.Connection, limit: int, now: float) -> list[OutboxRow]:
    """Claim due head-of-chat rows; a row left ambiguous is claimed as a possible duplicate."""
    rows = conn.execute(
        f"SELECT {_OUTBOX_COLUMNS} FROM outbox o WHERE o.status IN ('pending', 'ambiguous')"
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


def settle_outbox(conn: sqlite3.Connection, settlements: list[OutboxSettlement], now: float) -> None:
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


def confirm_outbox(conn: sqlite3.Connection, platform: str, chat_id: str, row_id: int, now: float) -> bool:
    return (
        conn.execute(
            "UPDATE outbox SET confirmed_at = ?, status = 'sent', sent_at = COALESCE(sent_at, ?)"
            " WHERE id = ? AND platform = ? AND chat_id = ? AND confirmed_at IS NULL",
            (now, now, row_id, platform, chat_id),
        ).rowcount
        == 1
    )


# ---------------------------------------------------------------- reads


def unconfirmed_for_chat(conn: sqlite3.Connection, platform: str, chat_id: str) -> list[OutboxRow]:
    rows = conn.execute(
        f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE platform = ? AND chat_id = ?"
        " AND confirmed_at IS NULL AND status IN ('pending', 'sending', 'sent', 'ambiguous')"
        " ORDER BY id",
        (platform, chat_id),
    ).fetchall()
    return [outbox_row(r) for r in rows]


def history(conn: sqlite3.Connection, session_id: str, limit: int) -> list[HistoryEntry]:
    rows = conn.execute(
        "SELECT role, content FROM (SELECT id, role, content FROM transcript WHERE session_id = ?"
        " ORDER BY id DESC LIMIT ?) ORDER BY id",
        (session_id, limit),
    ).fetchall()
    return [HistoryEntry(role=r[0], content=r[1]) for r in rows]


_SESSION_INFO = (
    "SELECT s.key, s.session_id, s.platform, s.chat_id, s.created_at, s.last_activity,"
    " (SELECT COUNT(*) FROM inbox i WHERE i.session_key = s.key AND i.status = 'queued'),"
    " s.lease_owner, s.last_error,"
    " (SELECT COUNT(*) FROM inbox i WHERE i.session_key = s.key AND i.status = 'queued'"
    " AND i.claimed_by IS NULL) FROM sessions s"
)


def session_info(conn: sqlite3.Connection, key: str) -> SessionInfo | None:
    row = conn.execute(_SESSION_INFO + " WHERE s.key = ?", (key,)).fetchone()
    return SessionInfo(*row) if row else None


def list_sessions(conn: sqlite3.Connection, limit: int) -> list[SessionInfo]:
    rows = conn.execute(_SESSION_INFO + " ORDER BY s.last_activity DESC LIMIT ?", (limit,))
    return [SessionInfo(*r) for r in rows.fetchall()]
