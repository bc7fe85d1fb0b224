"""Session claims over SQLite: the claim loop's (many sessions in admission order) and
admission's (the one session it just queued an event for, in the same transaction).

A claim leases the session to ``owner`` and takes its oldest queued items; write functions
are pure functions of the database and their arguments (``now`` is taken before queueing).
"""

from __future__ import annotations

import sqlite3

from msgspec.structs import replace

from chatgate.domain.inbound import Inbound
from chatgate.domain.turns import SUSPECT_AFTER_DEATHS, Claim, ClaimTerms, QueuedItem, TurnContext
from chatgate.store.codec import loads
from chatgate.store.sqlite.labels import chat_labels
from chatgate.store.sqlite.transcript import history
from chatgate.store.turn_rules import choose


def take_batch(
    conn: sqlite3.Connection,
    key: str,
    session_id: str,
    batch: int,
    owner: str,
    isolate: bool = False,
    stale_preview: str | None = None,
) -> Claim | None:
    rows = conn.execute(
        "SELECT seq, inbound_json, attempts, crashes FROM inbox WHERE session_key = ? AND status = 'queued'"
        " ORDER BY seq LIMIT ?",
        (key, batch),
    ).fetchall()
    if not rows:
        return None
    seqs = [r[0] for r in rows]
    conn.executemany(
        "UPDATE inbox SET attempts = attempts + 1, claimed_by = ?, isolated = ? WHERE seq = ?",
        [(owner, int(isolate), s) for s in seqs],
    )
    items = tuple(
        QueuedItem(
            seq=r[0],
            session_key=key,
            inbound=Inbound.from_dict(loads(r[1])),
            attempts=r[2] + 1,
            crashes=r[3],
        )
        for r in rows
    )
    return Claim(key, session_id, items, isolated=isolate, stale_preview=stale_preview)


def _lease(conn: sqlite3.Connection, key: str, owner: str, lease_s: float, now: float) -> None:
    conn.execute(
        "UPDATE sessions SET lease_owner = ?, lease_expires = ? WHERE key = ?",
        (owner, now + lease_s, key),
    )


def claim_sessions(
    conn: sqlite3.Connection,
    owner: str,
    limit: int,
    lease_s: float,
    batch: int,
    now: float,
    isolated: int = 1,
) -> list[Claim]:
    """Claim up to ``limit`` sessions by their oldest item, at most ``isolated`` of them suspects."""
    candidates = conn.execute(
        "SELECT s.key, s.session_id, h.attempts >= ?, s.preview_message_id FROM (SELECT session_key,"
        " MIN(seq) AS head FROM inbox WHERE status = 'queued' GROUP BY session_key) q"
        " JOIN sessions s ON s.key = q.session_key JOIN inbox h ON h.seq = q.head"
        " WHERE (s.lease_owner IS NULL OR s.lease_expires < ?)"
        " AND (s.retry_at IS NULL OR s.retry_at <= ?) AND (h.attempts < ? OR ? > 0)"
        " ORDER BY q.head LIMIT ?",
        (SUSPECT_AFTER_DEATHS, now, now, SUSPECT_AFTER_DEATHS, isolated, limit),
    ).fetchall()
    claims: list[Claim] = []
    for key, session_id, suspect, preview in choose(candidates, isolated):
        _lease(conn, key, owner, lease_s, now)
        claim = take_batch(conn, key, session_id, batch, owner, bool(suspect), preview)
        if claim is not None:
            claims.append(claim)
    return claims


def claim_admitted(conn: sqlite3.Connection, key: str, terms: ClaimTerms, now: float) -> Claim | None:
    """Claim ``key`` for admission's caller if the claim loop would: no live lease, no retry
    pending, its head item no suspect (suspects wait for the claim loop, which runs them alone)."""
    row = conn.execute(
        "SELECT s.session_id, s.preview_message_id FROM sessions s"
        " JOIN inbox h ON h.seq ="
        " (SELECT MIN(seq) FROM inbox WHERE session_key = s.key AND status = 'queued')"
        " WHERE s.key = ? AND (s.lease_owner IS NULL OR s.lease_expires < ?)"
        " AND (s.retry_at IS NULL OR s.retry_at <= ?) AND h.attempts < ?",
        (key, now, now, SUSPECT_AFTER_DEATHS),
    ).fetchone()
    if row is None:
        return None
    _lease(conn, key, terms.owner, terms.lease_seconds, now)
    claim = take_batch(conn, key, row[0], terms.batch, terms.owner, stale_preview=row[1])
    if claim is None or terms.context_rows is None:
        return claim
    source = claim.items[-1].inbound.source
    labels = chat_labels(conn, source.platform, source.scope_id, source.chat_id or "")
    return replace(claim, context=TurnContext(tuple(history(conn, row[0], terms.context_rows)), labels))
