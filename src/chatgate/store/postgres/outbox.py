"""The outbox role over PostgreSQL: the ledger of outbound messages, claimed head of chat first.

A row is claimed by the process its chat is reachable through (``route_holder``: the one
that admitted the session's latest event, or where the web client said hello last
(``hold_chat_route``), or where the bot polls), or by any process once that one is gone from
``processes``.

Across processes a claimed row is ``sending`` under its claimer's instance id
(``sending_holder``) and an expiry from the database clock: a row whose claimer died is
taken back by the next claim once its expiry passed, or at once by ``recover`` when
the claimer's liveness lock is gone. Claims lock the rows they take (``FOR UPDATE SKIP
LOCKED``), so two processes never hand out one row. ``insert_outbox`` is also how the
other roles' writes record messages in their own transaction.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Sequence
from typing import cast

import asyncpg

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.outbox import OutboxDraft, OutboxRow, OutboxSettlement, OutboxStatus, Undelivered
from chatgate.store.codec import draft_columns, dumps
from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.forwards import reads
from chatgate.store.postgres.sql import GONE, NOTIFY_CHANNEL, NOW, rowcount
from chatgate.store.rows import OUTBOX, STUCK, STUCK_WHERE, outbox_row, stuck_reply

log = logging.getLogger(__name__)
_OPEN = "('pending', 'sending', 'ambiguous')"


async def insert_outbox(conn: asyncpg.Connection, draft: OutboxDraft, now: float) -> None:
    """Record ``draft`` as a pending row; an existing ``idem_key`` makes this a no-op."""
    await conn.execute(
        "WITH added AS (INSERT INTO outbox (idem_key, platform, chat_id, session_key, kind, text,"
        " in_reply_to, target_json, status, created_at, route_holder) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,"
        " 'pending', $9, (SELECT route_holder FROM sessions WHERE key = $4))"
        " ON CONFLICT (idem_key) DO NOTHING RETURNING 1)"
        f" SELECT pg_notify({NOTIFY_CHANNEL}, 'outbox') FROM added",
        *draft_columns(draft, dumps(draft.target), now),
    )


OUTBOX_LEASE_SECONDS = 300.0
"""How long a claimed row stays ``sending`` before another process may resend it (default)."""

_INSERT_CLAIMED = (
    "WITH decide AS (SELECT r.holder AS route_holder, NOT EXISTS (SELECT 1 FROM outbox p"
    f" WHERE p.platform = $2 AND p.chat_id = $3 AND p.status IN {_OPEN}) AND (r.holder IS NULL"
    " OR r.holder = $10::text OR NOT EXISTS (SELECT 1 FROM processes x WHERE x.holder = r.holder)) AS mine"
    " FROM (SELECT (SELECT route_holder FROM sessions WHERE key = $4) AS holder) r),"
    " added AS (INSERT INTO outbox (idem_key, platform, chat_id, session_key, kind, text, in_reply_to,"
    " target_json, status, attempts, created_at, route_holder, sending_holder, sending_expires)"
    " SELECT $1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN mine THEN 'sending' ELSE 'pending' END,"
    " CASE WHEN mine THEN 1 ELSE 0 END, $9, route_holder, CASE WHEN mine THEN $10::text END,"
    f" CASE WHEN mine THEN {NOW} + $11::float8 END FROM decide"
    " ON CONFLICT (idem_key) DO NOTHING RETURNING id, status),"
    f" told AS (SELECT pg_notify({NOTIFY_CHANNEL}, 'outbox') FROM added WHERE status = 'pending')"
    " SELECT id, status, (SELECT COUNT(*) FROM told) FROM added"
)


async def insert_claimed(
    conn: asyncpg.Connection, draft: OutboxDraft, now: float, holder: str, lease_s: float
) -> OutboxRow | None:
    """Record ``draft`` already claimed by ``holder`` if ``claim_outbox`` would hand it to this
    process now (its chat has no open row, and its route is this process, none, or a gone one):
    ``sending`` under ``holder`` with its first attempt counted. Otherwise record it ``pending``
    (and notify the fleet), as ``insert_outbox`` does. One statement either way.

    Returns the claimed row, or None when it was recorded pending or its ``idem_key`` existed."""
    target = dumps(draft.target)
    added = await conn.fetchrow(
        _INSERT_CLAIMED,
        *draft_columns(draft, target, now),
        holder,
        lease_s,
    )
    if added is None or added[1] != "sending":
        return None
    return draft.claimed(added[0], now, json.loads(target))


async def requeue_mid_send(conn: asyncpg.Connection, holder: str) -> int:
    """Rows a dead claimer left ``sending`` go back to ``pending`` as possible duplicates.

    Dead: this instance itself (``recover`` runs before it sends), a claimer whose expiry
    passed, or one ``reap_dead`` has reaped (never one whose lock is free only for a moment)."""
    return rowcount(
        await conn.execute(
            "UPDATE outbox SET status = 'pending', possibly_duplicate = TRUE, next_attempt_at = NULL,"
            " sending_holder = NULL, sending_expires = NULL WHERE status = 'sending'"
            f" AND (sending_holder = $1 OR sending_expires < {NOW}"
            f" OR {GONE.format('sending_holder')})",
            holder,
        )
    )


async def release_unattended(
    conn: asyncpg.Connection, holder: str, attended: list[int]
) -> list[tuple[int, str, str]]:
    """Rows ``sending`` under ``holder`` that no local attempt covers (``attended``: the ids being
    sent) go back to ``pending`` as possible duplicates: (id, platform, chat id) of each."""
    rows = await conn.fetch(
        "UPDATE outbox SET status = 'pending', possibly_duplicate = TRUE, next_attempt_at = NULL,"
        " sending_holder = NULL, sending_expires = NULL WHERE status = 'sending'"
        " AND sending_holder = $1 AND NOT (id = ANY($2::bigint[])) RETURNING id, platform, chat_id",
        holder,
        attended,
    )
    if rows:
        await conn.execute(f"SELECT pg_notify({NOTIFY_CHANNEL}, 'outbox')")
    return sorted((r[0], r[1], r[2]) for r in rows)


async def hold_chat_route(conn: asyncpg.Connection, platform: str, chat_id: str, holder: str) -> int:
    """The chat's live connection is in ``holder`` now (a web client said hello there): its
    sessions' later replies are recorded for ``holder``, and its open rows move to it, due at
    once, so they follow the client instead of waiting for the process it left. Returns the
    number of rows moved (and notifies the fleet when any moved).

    The sessions are updated first: a turn's commit locks its session row before it records a
    reply, so a reply committed meanwhile is either seen by the move or recorded for ``holder``."""
    await conn.execute(
        "UPDATE sessions SET route_holder = $3 WHERE platform = $1 AND chat_id = $2"
        " AND route_holder IS DISTINCT FROM $3",
        platform,
        chat_id,
        holder,
    )
    moved = rowcount(
        await conn.execute(
            "UPDATE outbox SET route_holder = $3, next_attempt_at = CASE WHEN status = 'sending'"
            " THEN next_attempt_at END WHERE platform = $1 AND chat_id = $2"
            f" AND status IN {_OPEN} AND route_holder IS DISTINCT FROM $3",
            platform,
            chat_id,
            holder,
        )
    )
    if moved:
        await conn.execute(f"SELECT pg_notify({NOTIFY_CHANNEL}, 'outbox')")
    return moved


async def undelivered(conn: asyncpg.Connection, now: float, stuck_after: float, most: int) -> Undelivered:
    row = await conn.fetchrow(f"SELECT COUNT(*), MIN(created_at) FROM outbox WHERE status IN {_OPEN}")
    assert row is not None
    where = STUCK_WHERE.format(cutoff="$1::float8", now="$2::float8")
    rows = await conn.fetch(
        f"SELECT {STUCK.format(holder='o.sending_holder')} FROM outbox o WHERE {where}"
        " ORDER BY o.id LIMIT $3",
        now - stuck_after,
        now,
        most,
    )
    return Undelivered(int(row[0]), row[1], tuple(stuck_reply(r) for r in rows))


def _named(rows: list[tuple[int, str, str]], most: int = 50) -> str:
    named = ", ".join(f"{i} ({platform}/{chat})" for i, platform, chat in rows[:most])
    return named + (f" and {len(rows) - most} more" if len(rows) > most else "")


async def claim_outbox(conn: asyncpg.Connection, limit: int, holder: str, lease_s: float) -> list[OutboxRow]:
    """Claim due head-of-chat rows; a row left ambiguous, or left ``sending`` past its claim's
    expiry (its claimer hung or died unnoticed), is claimed as a possible duplicate."""
    rows = await conn.fetch(
        f"SELECT {OUTBOX} FROM outbox o WHERE (o.status IN ('pending', 'ambiguous')"
        f" AND (o.next_attempt_at IS NULL OR o.next_attempt_at <= {NOW})"
        f" OR o.status = 'sending' AND o.sending_expires < {NOW})"
        " AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.platform = o.platform"
        f" AND p.chat_id = o.chat_id AND p.id < o.id AND p.status IN {_OPEN})"
        " AND (o.route_holder IS NULL OR o.route_holder = $2"
        " OR NOT EXISTS (SELECT 1 FROM processes r WHERE r.holder = o.route_holder))"
        " ORDER BY o.id LIMIT $1 FOR UPDATE OF o SKIP LOCKED",
        limit,
        holder,
    )
    if not rows:
        return []
    claimed = await conn.fetch(
        "UPDATE outbox SET possibly_duplicate = possibly_duplicate OR status IN ('ambiguous', 'sending'),"
        f" status = 'sending', attempts = attempts + 1, sending_holder = $2, sending_expires = {NOW} + $3"
        f" WHERE id = ANY($1::bigint[]) RETURNING {OUTBOX}",
        [r[0] for r in rows],
        holder,
        lease_s,
    )
    return sorted((outbox_row(r) for r in claimed), key=lambda r: r.id)


_MOVED_AWAY = (
    "$1 = 'pending' AND route_holder IS DISTINCT FROM sending_holder"
    " AND EXISTS (SELECT 1 FROM processes x WHERE x.holder = outbox.route_holder)"
)
"""A row put back while its chat's route moved to another live process since it was claimed
(``hold_chat_route`` ran during the attempt): due at once, for the process the client is on now.
(A row claimed because its route holder was gone keeps its retry time: nobody else has the chat.)"""


async def settle_outbox(conn: asyncpg.Connection, settlements: list[OutboxSettlement], now: float) -> bool:
    for s in settlements:
        # A row the client already confirmed stays confirmed whatever a racing send reports.
        await conn.execute(
            "UPDATE outbox SET status = $1, platform_message_id = COALESCE($2, platform_message_id),"
            f" next_attempt_at = CASE WHEN {_MOVED_AWAY} THEN NULL ELSE $3::float8 END,"
            " last_error = $4, attempts = attempts - $5,"
            " sent_at = CASE WHEN $1 = 'sent' THEN $6 ELSE sent_at END,"
            " sending_holder = NULL, sending_expires = NULL"
            " WHERE id = $7 AND (confirmed_at IS NULL OR $1 = 'sent')",
            s.status,
            s.platform_message_id,
            s.retry_at,
            s.error,
            0 if s.counts_attempt else 1,
            now,
            s.id,
        )
    # Another open row behind a settled one in its chat (the open-row index finds it).
    more = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM outbox o JOIN outbox r ON o.platform = r.platform"
        " AND o.chat_id = r.chat_id AND o.id > r.id WHERE r.id = ANY($1::bigint[])"
        " AND o.status IN ('pending', 'ambiguous'))",
        [s.id for s in settlements],
    )
    return bool(more)


async def confirm_outbox(
    conn: asyncpg.Connection, platform: str, chat_id: str, row_id: int, now: float
) -> bool:
    status = await conn.execute(
        "UPDATE outbox SET confirmed_at = $1, status = 'sent', sent_at = COALESCE(sent_at, $1),"
        " sending_holder = NULL, sending_expires = NULL"
        " WHERE id = $2 AND platform = $3 AND chat_id = $4 AND confirmed_at IS NULL",
        now,
        row_id,
        platform,
        chat_id,
    )
    return rowcount(status) == 1


async def unconfirmed_for_chat(
    conn: asyncpg.Connection, platform: str, chat_id: str, after_id: int = 0, limit: int | None = None
) -> list[OutboxRow]:
    rows = await conn.fetch(
        f"SELECT {OUTBOX} FROM outbox WHERE platform = $1 AND chat_id = $2 AND id > $3"
        " AND confirmed_at IS NULL AND status IN ('pending', 'sending', 'sent', 'ambiguous')"
        " ORDER BY id LIMIT $4",
        platform,
        chat_id,
        after_id,
        limit,
    )
    return [outbox_row(r) for r in rows]


async def outbox_status(conn: asyncpg.Connection, idem_key: str) -> OutboxStatus | None:
    found = await conn.fetchval("SELECT status FROM outbox WHERE idem_key = $1", idem_key)
    return None if found is None else cast(OutboxStatus, found)


async def undelivered_in_chat(conn: asyncpg.Connection, platform: str, chat_id: str) -> int:
    found = await conn.fetchval(
        f"SELECT COUNT(*) FROM outbox WHERE platform = $1 AND chat_id = $2 AND status IN {_OPEN}",
        platform,
        chat_id,
    )
    return int(found)


class PgOutbox(PgRole):
    """``Outbox``: claims and settlements (delivery), confirmations (web chat), notices."""

    outbox_lease_seconds: float = OUTBOX_LEASE_SECONDS
    """How long a claimed row stays ``sending`` before another process may resend it."""

    async def claim_outbox(self, limit: int) -> list[OutboxRow]:
        holder, lease, sends = self._db.holder, self.outbox_lease_seconds, self._db.sends
        await self._db.hold_liveness()
        await self._release_unattended()
        try:
            async with sends.claiming():
                rows = await self._db.write(lambda c: claim_outbox(c, limit, holder, lease))
                sends.handed_out(r.id for r in rows)
        except StoreUnavailable:
            with contextlib.suppress(StoreUnavailable):  # resolved now if the server answers, else next time
                await self._release_unattended()
            raise
        return rows

    async def _release_unattended(self) -> None:
        """After a claim or settlement in doubt: rows this process holds with no send under way
        are released now (and named), not when their lease runs out (``local_sends.py``)."""
        holder = self._db.holder
        async with self._db.sends.releasing() as attended:
            if attended is None:
                return
            released = await self._db.write(lambda c: release_unattended(c, holder, attended))
            if released:
                log.warning(
                    "outbox rows held by this process with no send under way (a claim or settlement"
                    " was in doubt) are released for delivery now: %s",
                    _named(released),
                )

    async def settle_outbox(self, settlements: list[OutboxSettlement]) -> bool:
        if not settlements:
            return False
        now, ids = time.time(), [s.id for s in settlements]
        try:
            more = await self._db.write(lambda c: settle_outbox(c, settlements, now))
        except BaseException:
            self._db.sends.settled(ids, recorded=False)
            raise
        self._db.sends.settled(ids, recorded=True)
        return more

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
        holder = self._db.holder
        return await self._db.write(lambda c: hold_chat_route(c, platform, chat_id, holder))

    outbox_status = reads(outbox_status)
    undelivered_in_chat = reads(undelivered_in_chat)

    async def enqueue_outbox(self, drafts: Sequence[OutboxDraft]) -> None:
        if not drafts:
            return
        now = time.time()
        items = list(drafts)

        async def write(c: asyncpg.Connection) -> None:
            for draft in items:
                await insert_outbox(c, draft, now)

        await self._db.write(write)
