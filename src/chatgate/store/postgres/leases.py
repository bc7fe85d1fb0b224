"""The leases role over PostgreSQL: claims across processes, renewals, and the statements of a
turn's commit, abandon and resume, whose rules are ``store.turn_rules``.

A claim locks the candidate session rows ``FOR UPDATE SKIP LOCKED``: two processes
claiming at once take disjoint sessions and never wait for each other. A lease has an
owner (the process's owner name), a holder (the store instance, whose liveness lock
tells peers it is alive), an expiry from the database clock and a token counted up
by every claim. A turn commits only while its owner still holds the lease and every
item of the turn is still queued and claimed by it: a stale owner's late commit
raises ``LeaseLost`` and changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence

import asyncpg

from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbound import Inbound
from chatgate.domain.outbox import OutboxDraft, OutboxRow
from chatgate.domain.turns import SUSPECT_AFTER_DEATHS, Claim, QueuedItem, TurnCommit, TurnOutcome
from chatgate.store import turn_rules
from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.fleet import REAP_GRACE, reap_dead
from chatgate.store.postgres.forwards import writes
from chatgate.store.postgres.outbox import OUTBOX_LEASE_SECONDS, insert_claimed, insert_outbox
from chatgate.store.postgres.sql import GONE, NOW, rowcount
from chatgate.store.postgres.tasks import TaskSql
from chatgate.store.postgres.transcript import append_transcript
from chatgate.store.turn_rules import CompletesTurns, TurnStatements, choose


async def _take_batch(
    conn: asyncpg.Connection,
    key: str,
    session_id: str,
    batch: int,
    owner: str,
    isolate: bool = False,
    stale_preview: str | None = None,
) -> Claim | None:
    rows = await conn.fetch(
        "UPDATE inbox SET attempts = attempts + 1, claimed_by = $1, isolated = $2 WHERE seq IN"
        " (SELECT seq FROM inbox WHERE session_key = $3 AND status = 'queued' ORDER BY seq LIMIT $4)"
        " RETURNING seq, inbound_json, attempts, crashes",
        owner,
        isolate,
        key,
        batch,
    )
    if not rows:
        return None
    items = tuple(
        QueuedItem(
            seq=r[0],
            session_key=key,
            inbound=Inbound.from_dict(json.loads(r[1])),
            attempts=r[2],
            crashes=r[3],
        )
        for r in sorted(rows, key=lambda r: int(r[0]))
    )
    return Claim(key, session_id, items, isolated=isolate, stale_preview=stale_preview)


async def _blame_dead_turns(conn: asyncpg.Connection, keys: list[str]) -> None:
    """Items an expired turn left claimed go back to waiting. A death while isolated is blamed
    only if the lease's holder is dead: a live one whose release failed (an outage) or that
    stalled past its lease did not die, and its turn is not blamed for it."""
    await conn.execute(
        "UPDATE inbox i SET crashes = crashes + CASE WHEN i.isolated AND NOT EXISTS (SELECT 1"
        " FROM sessions s JOIN processes p ON p.holder = s.lease_holder WHERE s.key = i.session_key)"
        " THEN 1 ELSE 0 END, claimed_by = NULL, isolated = FALSE"
        " WHERE i.session_key = ANY($1::text[]) AND i.status = 'queued' AND i.claimed_by IS NOT NULL",
        keys,
    )


_CANDIDATES = (
    "SELECT s.key, s.session_id, h.attempts >= $1, s.preview_message_id FROM"
    " (SELECT DISTINCT ON (session_key) session_key, seq, attempts FROM inbox WHERE status = 'queued'"
    " ORDER BY session_key, seq) h JOIN sessions s ON s.key = h.session_key"
    f" WHERE (s.lease_owner IS NULL OR s.lease_expires < {NOW})"
    f" AND (s.retry_at IS NULL OR s.retry_at <= {NOW}) AND (h.attempts < $1 OR $2 > 0)"
    " ORDER BY h.seq LIMIT $3 FOR UPDATE OF s SKIP LOCKED"
)


_TAKE_HEADS = (
    "WITH picked AS (SELECT i.seq, k.iso FROM unnest($1::text[], $2::bool[]) AS k(key, iso)"
    " CROSS JOIN LATERAL (SELECT seq FROM inbox WHERE session_key = k.key AND status = 'queued'"
    " ORDER BY seq LIMIT $3) i)"
    " UPDATE inbox SET attempts = attempts + 1, claimed_by = $4, isolated = picked.iso FROM picked"
    " WHERE inbox.seq = picked.seq"
    " RETURNING inbox.session_key, inbox.seq, inbox.inbound_json, inbox.attempts, inbox.crashes"
)


async def claim_sessions(
    conn: asyncpg.Connection,
    owner: str,
    holder: str,
    limit: int,
    lease_s: float,
    batch: int,
    isolated: int = 1,
    grace: float = REAP_GRACE,
) -> list[Claim]:
    """Claim up to ``limit`` sessions by their oldest item, at most ``isolated`` of them suspects.

    Dead peers are reaped first, so their sessions are among the candidates. However many
    sessions it takes, a claim is five statements: reap, lock the candidates, hand back
    what dead turns left claimed, take each session's head batch, set the leases."""
    await reap_dead(conn, holder, grace)
    chosen = choose(await conn.fetch(_CANDIDATES, SUSPECT_AFTER_DEATHS, isolated, limit), isolated)
    if not chosen:
        return []
    keys = [c[0] for c in chosen]
    await _blame_dead_turns(conn, keys)
    items: dict[str, list[QueuedItem]] = {}
    for r in await conn.fetch(_TAKE_HEADS, keys, [bool(c[2]) for c in chosen], batch, owner):
        inbound = Inbound.from_dict(json.loads(r[2]))
        items.setdefault(r[0], []).append(QueuedItem(r[1], r[0], inbound, r[3], r[4]))
    taken = [c for c in chosen if c[0] in items]
    await conn.execute(
        f"UPDATE sessions SET lease_owner = $1, lease_holder = $2, lease_expires = {NOW} + $3,"
        " lease_token = lease_token + 1 WHERE key = ANY($4::text[])",
        owner,
        holder,
        lease_s,
        [c[0] for c in taken],
    )
    return [
        Claim(
            key, sid, tuple(sorted(items[key], key=lambda i: i.seq)), isolated=bool(suspect), stale_preview=p
        )
        for key, sid, suspect, p in taken
    ]


async def renew_lease(conn: asyncpg.Connection, key: str, owner: str, lease_s: float) -> bool:
    status = await conn.execute(
        f"UPDATE sessions SET lease_expires = {NOW} + $1 WHERE key = $2 AND lease_owner = $3",
        lease_s,
        key,
        owner,
    )
    return rowcount(status) == 1


class TurnSql(TurnStatements):
    """``TurnStatements`` on the connection of one transaction. The session row is locked before
    anything of its turn changes, the order every writer of a session takes; ``holder`` (this
    store instance) is who a reply recorded claimed is claimed by, for ``send_lease_s``."""

    def __init__(
        self, conn: asyncpg.Connection, holder: str, send_lease_s: float = OUTBOX_LEASE_SECONDS
    ) -> None:
        self._c = conn
        self._holder = holder
        self._send_lease_s = send_lease_s

    async def leased_session_id(self, session_key: str, owner: str) -> str | None:
        found = await self._c.fetchval(
            "SELECT session_id FROM sessions WHERE key = $1 AND lease_owner = $2 FOR UPDATE",
            session_key,
            owner,
        )
        return None if found is None else str(found)

    async def items_held(self, seqs: tuple[int, ...], owner: str) -> int:
        """Still queued and claimed by ``owner``: a peer that took the session over claimed them anew."""
        found = await self._c.fetchval(
            "SELECT COUNT(*) FROM inbox WHERE seq = ANY($1::bigint[]) AND status = 'queued'"
            " AND claimed_by = $2",
            list(seqs),
            owner,
        )
        return int(found)

    async def mark_done(self, seqs: tuple[int, ...], outcome: str, now: float) -> None:
        await self._c.execute(
            "UPDATE inbox SET status = 'done', finished_at = $1, outcome = $2 WHERE seq = ANY($3::bigint[])",
            *(now, outcome, list(seqs)),
        )

    async def append_transcript(
        self, session_id: str, session_key: str, entries: Sequence[HistoryEntry], now: float
    ) -> None:
        await append_transcript(self._c, session_id, session_key, entries, now)

    def tasks(self) -> TaskSql:
        return TaskSql(self._c, self._holder)

    async def insert_claimed(self, draft: OutboxDraft, now: float) -> OutboxRow | None:
        return await insert_claimed(self._c, draft, now, self._holder, self._send_lease_s)

    async def insert_outbox(self, draft: OutboxDraft, now: float) -> None:
        await insert_outbox(self._c, draft, now)

    async def renew_after_turn(self, session_key: str, now: float, lease_s: float) -> None:
        await self._c.execute(
            "UPDATE sessions SET last_activity = $1, retry_at = NULL, last_error = NULL,"
            f" preview_message_id = NULL, lease_expires = {NOW} + $2 WHERE key = $3",
            *(now, lease_s, session_key),
        )

    async def take_batch(self, session_key: str, session_id: str, batch: int, owner: str) -> Claim | None:
        return await _take_batch(self._c, session_key, session_id, batch, owner)

    async def release_lease(self, session_key: str) -> None:
        await self._c.execute(
            "UPDATE sessions SET lease_owner = NULL, lease_holder = NULL, lease_expires = NULL"
            " WHERE key = $1",
            session_key,
        )

    async def give_back(self, session_key: str, owner: str, seqs: tuple[int, ...]) -> None:
        await self._c.execute(
            "UPDATE inbox SET attempts = GREATEST(attempts - 1, 0), claimed_by = NULL, isolated = FALSE"
            " WHERE (seq = ANY($1::bigint[]) OR session_key = $2 AND claimed_by = $3) AND status = 'queued'",
            list(seqs),
            session_key,
            owner,
        )

    async def release_for_retry(
        self, session_key: str, owner: str, retry_at: float | None, error: str | None
    ) -> None:
        await self._c.execute(
            "UPDATE sessions SET lease_owner = NULL, lease_holder = NULL, lease_expires = NULL,"
            " retry_at = $1, preview_message_id = NULL, last_error = COALESCE($2, last_error)"
            " WHERE key = $3 AND lease_owner = $4",
            *(retry_at, error, session_key, owner),
        )

    async def set_preview(self, owner: str, session_key: str, message_id: str | None) -> bool:
        return await record_preview(self._c, owner, session_key, message_id)


async def record_preview(
    conn: asyncpg.Connection, owner: str, session_key: str, message_id: str | None
) -> bool:
    status = await conn.execute(
        "UPDATE sessions SET preview_message_id = $1 WHERE key = $2 AND lease_owner = $3",
        message_id,
        session_key,
        owner,
    )
    return rowcount(status) == 1


async def release_dead_owners(conn: asyncpg.Connection, owner: str, holder: str) -> int:
    """Release the leases of every owner but ``owner`` that is dead, and blame their isolated turns.

    Dead: held by this very store instance under another owner name (one process runs one
    owner; ``recover`` is its start), expired by the database clock, or held by an instance
    ``reap_dead`` has reaped (its liveness lock free *and* silent past the grace). A live peer
    whose liveness connection is being re-made has a free lock for a moment: its lease stays."""
    released = await conn.fetch(
        "UPDATE sessions SET lease_owner = NULL, lease_holder = NULL, lease_expires = NULL"
        " WHERE lease_owner IS NOT NULL AND lease_owner <> $1 AND (lease_holder = $2"
        f" OR lease_expires < {NOW} OR {GONE.format('lease_holder')})"
        " RETURNING key",
        owner,
        holder,
    )
    keys = [r[0] for r in released]
    await conn.execute(
        "UPDATE inbox SET crashes = crashes + CASE WHEN isolated THEN 1 ELSE 0 END, claimed_by = NULL,"
        " isolated = FALSE WHERE session_key = ANY($1::text[]) AND status = 'queued'"
        " AND claimed_by IS NOT NULL",
        keys,
    )
    return len(keys)


class PgLeases(PgRole, CompletesTurns):
    """``Leases``: every method is one transaction; a claim first makes sure this instance
    is seen alive (its liveness lock), so a peer never mistakes its fresh lease for a dead one."""

    outbox_lease_seconds: float = OUTBOX_LEASE_SECONDS
    """How long a row ``commit_turn`` claims stays ``sending`` (the store sets it, as for ``PgOutbox``)."""

    async def claim_sessions(
        self, owner: str, limit: int, lease_seconds: float, batch: int, isolated: int = 1
    ) -> list[Claim]:
        holder, grace = self._db.holder, self._db.reap_grace
        await self._db.hold_liveness()
        return await self._db.write(
            lambda c: claim_sessions(c, owner, holder, limit, lease_seconds, batch, isolated, grace)
        )

    record_preview = writes(record_preview)

    async def record_notices(self, owner: str, session_key: str, notices: Sequence[OutboxDraft]) -> bool:
        now, holder = time.time(), self._db.holder
        return await self._db.write(
            lambda c: turn_rules.record_notices(TurnSql(c, holder), owner, session_key, notices, now)
        )

    async def renew_lease(self, session_key: str, owner: str, lease_seconds: float) -> bool:
        return await self._db.write(lambda c: renew_lease(c, session_key, owner, lease_seconds))

    async def commit_turn(
        self, owner: str, outcome: TurnOutcome, lease_seconds: float, batch: int, send_room: int
    ) -> TurnCommit:
        now, holder, send_lease = time.time(), self._db.holder, self.outbox_lease_seconds
        if send_room > 0:  # rows claimed under this instance: peers must see it alive, as for a claim
            await self._db.hold_liveness()
        claiming: contextlib.AbstractAsyncContextManager[object] = (
            self._db.sends.claiming() if send_room > 0 else contextlib.nullcontext()
        )
        async with claiming:
            committed = await turn_rules.committed_then_logged(
                lambda finished: self._db.write(
                    lambda c: turn_rules.commit_turn(
                        TurnSql(c, holder, send_lease),
                        owner,
                        outcome,
                        lease_seconds,
                        batch,
                        now,
                        send_room,
                        finished,
                    )
                )
            )
            self._db.sends.handed_out(r.id for r in committed.sending)
        return committed

    async def abandon_turn(
        self,
        owner: str,
        session_key: str,
        item_seqs: tuple[int, ...],
        retry_at: float | None,
        error: str | None,
    ) -> None:
        holder = self._db.holder
        await self._db.write(
            lambda c: turn_rules.abandon_turn(
                TurnSql(c, holder), owner, session_key, item_seqs, retry_at, error
            )
        )
