"""The session profiles role over PostgreSQL: each session's ``/model`` choice, by session key."""

from __future__ import annotations

import asyncpg

from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.forwards import reads, writes


async def session_profile(conn: asyncpg.Connection, session_key: str) -> str | None:
    value = await conn.fetchval("SELECT profile FROM session_profiles WHERE session_key = $1", session_key)
    return None if value is None else str(value)


async def set_session_profile(conn: asyncpg.Connection, session_key: str, profile: str, now: float) -> None:
    await conn.execute(
        "INSERT INTO session_profiles AS p (session_key, profile, updated_at) VALUES ($1,$2,$3)"
        " ON CONFLICT (session_key) DO UPDATE SET profile = excluded.profile,"
        " updated_at = excluded.updated_at"
        " WHERE p.profile <> excluded.profile",
        session_key,
        profile,
        now,
    )


class PgSessionProfiles(PgRole):
    """``SessionProfiles``."""

    session_profile = reads(session_profile)
    set_session_profile = writes(set_session_profile)
