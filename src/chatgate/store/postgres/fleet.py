"""The fleet's own state: which processes are alive, and what a dead one leaves to the others.

Each store instance has a row in ``processes`` and holds its liveness lock (see
``database.py``). Any live instance that finds a peer's lock free (the peer's connection
is gone: it was killed, its host died) reaps it in one transaction: the row, its session
leases (a death while a turn ran isolated is blamed on that turn's items) and its
mid-send outbox rows, which go back to ``pending`` as possible duplicates. A claim reaps
first, so a dead process's sessions pass to a live one within a poll, not at lease expiry.
"""

from __future__ import annotations

import json

import asyncpg

from chatgate.store.postgres.sql import HOLDER_KEY, NOW

REAP_GRACE = 5.0
"""Seconds (database clock) a peer must also have been silent to be reaped: a live process
whose liveness connection was cut (a database blip) keeps claiming, so it is not taken for
dead while it takes its lock again; a killed one stops, and is reaped after this."""


SERVER_STARTED = "extract(epoch from pg_postmaster_start_time())::float8"


async def reap_dead(conn: asyncpg.Connection, holder: str, grace: float = REAP_GRACE) -> int:
    """Note that ``holder`` is alive, then remove every dead peer and hand back what it held.

    Dead: its liveness lock is free and it has not claimed for ``grace`` seconds, counted from
    the database server's own start when that came later: a restarted server dropped every
    lock, and a live peer is given the grace to take its own back before it is taken for dead
    (its turns would otherwise run again elsewhere as "the gateway restarted"). Returns the
    leases released."""
    rows = await conn.fetch(
        f"WITH beat AS (UPDATE processes SET seen_at = {NOW} WHERE holder = $1)"
        " DELETE FROM processes WHERE holder <> $1"
        f" AND GREATEST(seen_at, {SERVER_STARTED}) < {NOW} - $2"
        f" AND pg_try_advisory_xact_lock({HOLDER_KEY.format('holder')}) RETURNING holder",
        holder,
        grace,
    )
    dead = [r[0] for r in rows]
    return await release_holders(conn, dead) if dead else 0


async def release_holders(conn: asyncpg.Connection, dead: list[str]) -> int:
    """The leases and mid-send rows of dead holders, back to the queue; returns the leases."""
    released = await conn.fetch(
        "UPDATE sessions SET lease_owner = NULL, lease_holder = NULL, lease_expires = NULL"
        " WHERE lease_holder = ANY($1::text[]) RETURNING key",
        dead,
    )
    keys = [r[0] for r in released]
    await conn.execute(
        "UPDATE inbox SET crashes = crashes + CASE WHEN isolated THEN 1 ELSE 0 END, claimed_by = NULL,"
        " isolated = FALSE WHERE session_key = ANY($1::text[]) AND status = 'queued'"
        " AND claimed_by IS NOT NULL",
        keys,
    )
    await conn.execute(
        "UPDATE outbox SET status = 'pending', possibly_duplicate = TRUE, next_attempt_at = NULL,"
        " sending_holder = NULL, sending_expires = NULL"
        " WHERE status = 'sending' AND sending_holder = ANY($1::text[])",
        dead,
    )
    return len(keys)


async def members(conn: asyncpg.Connection, holder: str) -> list[dict[str, object]]:
    """The fleet as ``chatgate status`` shows it: every other process, alive or not yet reaped."""
    rows = await conn.fetch(
        "SELECT p.holder, p.owner, p.host, p.pid, p.started_at, p.adapters,"
        " (SELECT COUNT(*) FROM sessions s WHERE s.lease_holder = p.holder) AS leases,"
        " (SELECT COUNT(*) FROM outbox o WHERE o.sending_holder = p.holder AND o.status = 'sending')"
        f" AS sending, NOT pg_try_advisory_xact_lock({HOLDER_KEY.format('p.holder')}) AS alive"
        " FROM processes p WHERE p.holder <> $1 ORDER BY p.started_at",
        holder,
    )
    return [dict(r) | {"adapters": json.loads(r["adapters"] or "{}")} for r in rows]
