"""The ``Accounts`` role over PostgreSQL: users, sign-in tokens and browser sessions (hashes only).

Functions take a connection, so ``chatgate user`` writes to a fleet's schema as
``chatgate api-key`` does (``app/cli/fleet.py``).
"""

from __future__ import annotations

import asyncpg

from chatgate.domain.accounts import Account, SignedIn, SignInToken, WebSession
from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.forwards import reads, writes
from chatgate.store.postgres.sql import rowcount
from chatgate.store.rows import ACCOUNT, TOKEN, WEB_SESSION, account_of, token_of, web_session_of


async def create_account(conn: asyncpg.Connection, account: Account, password_hash: str | None) -> bool:
    status = await conn.execute(
        "INSERT INTO accounts (user_id, name, role, password_hash, created_at, revoked_at)"
        " VALUES ($1,$2,$3,$4,$5,$6) ON CONFLICT DO NOTHING",
        account.user_id,
        account.name,
        account.role,
        password_hash,
        account.created_at,
        account.revoked_at,
    )
    return rowcount(status) > 0


async def account_by_name(conn: asyncpg.Connection, name: str) -> tuple[Account, str | None] | None:
    row = await conn.fetchrow(f"SELECT {ACCOUNT}, a.password_hash FROM accounts a WHERE a.name = $1", name)
    return None if row is None else (account_of(row), None if row[5] is None else str(row[5]))


async def list_accounts(conn: asyncpg.Connection) -> list[Account]:
    rows = await conn.fetch(f"SELECT {ACCOUNT} FROM accounts a ORDER BY a.created_at, a.name")
    return [account_of(r) for r in rows]


async def add_sign_in_token(conn: asyncpg.Connection, token: SignInToken, token_hash: str) -> None:
    await conn.execute(
        "INSERT INTO sign_in_tokens (token_id, user_id, token_hash, created_at, revoked_at)"
        " VALUES ($1,$2,$3,$4,$5)",
        token.token_id,
        token.user_id,
        token_hash,
        token.created_at,
        token.revoked_at,
    )


async def sign_in_token_by_hash(
    conn: asyncpg.Connection, token_hash: str
) -> tuple[SignInToken, Account] | None:
    row = await conn.fetchrow(
        f"SELECT {TOKEN}, {ACCOUNT} FROM sign_in_tokens t JOIN accounts a ON a.user_id = t.user_id"
        " WHERE t.token_hash = $1",
        token_hash,
    )
    return None if row is None else (token_of(tuple(row)[:4]), account_of(tuple(row)[4:]))


async def list_sign_in_tokens(conn: asyncpg.Connection) -> list[SignInToken]:
    rows = await conn.fetch(f"SELECT {TOKEN} FROM sign_in_tokens t ORDER BY t.created_at, t.token_id")
    return [token_of(r) for r in rows]


async def revoke_account(conn: asyncpg.Connection, user_id: str, now: float) -> bool:
    status = await conn.execute(
        "UPDATE accounts SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL", now, user_id
    )
    await conn.execute(
        "UPDATE sign_in_tokens SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL", now, user_id
    )
    await conn.execute(
        "UPDATE web_sessions SET ended_at = $1 WHERE user_id = $2 AND ended_at IS NULL", now, user_id
    )
    return rowcount(status) > 0


async def revoke_sign_in_token(conn: asyncpg.Connection, token_id: str, now: float) -> bool:
    status = await conn.execute(
        "UPDATE sign_in_tokens SET revoked_at = $1 WHERE token_id = $2 AND revoked_at IS NULL", now, token_id
    )
    await conn.execute(
        "UPDATE web_sessions SET ended_at = $1 WHERE via = $2 AND ended_at IS NULL", now, token_id
    )
    return rowcount(status) > 0


async def create_web_session(conn: asyncpg.Connection, session: WebSession, cookie_hash: str) -> None:
    await conn.execute(
        "INSERT INTO web_sessions (session_id, user_id, cookie_hash, via, created_at, expires_at, ended_at)"
        " VALUES ($1,$2,$3,$4,$5,$6,$7)",
        session.session_id,
        session.user_id,
        cookie_hash,
        session.via,
        session.created_at,
        session.expires_at,
        session.ended_at,
    )


async def signed_in(conn: asyncpg.Connection, cookie_hash: str, now: float) -> SignedIn | None:
    row = await conn.fetchrow(
        f"SELECT {WEB_SESSION}, {ACCOUNT} FROM web_sessions s JOIN accounts a ON a.user_id = s.user_id"
        " WHERE s.cookie_hash = $1 AND s.ended_at IS NULL AND s.expires_at > $2 AND a.revoked_at IS NULL",
        cookie_hash,
        now,
    )
    return None if row is None else SignedIn(web_session_of(tuple(row)[:6]), account_of(tuple(row)[6:]))


async def end_web_session(conn: asyncpg.Connection, session_id: str, now: float) -> bool:
    status = await conn.execute(
        "UPDATE web_sessions SET ended_at = $1"
        " WHERE session_id = $2 AND ended_at IS NULL AND expires_at > $1",
        now,
        session_id,
    )
    return rowcount(status) > 0


async def live_sessions(conn: asyncpg.Connection, session_ids: list[str], now: float) -> set[str]:
    rows = await conn.fetch(
        "SELECT s.session_id FROM web_sessions s JOIN accounts a ON a.user_id = s.user_id"
        " WHERE s.session_id = ANY($1::text[]) AND s.ended_at IS NULL AND s.expires_at > $2"
        " AND a.revoked_at IS NULL",
        session_ids,
        now,
    )
    return {str(r[0]) for r in rows}


class PgAccounts(PgRole):
    """``Accounts``."""

    create_account = writes(create_account)
    account_by_name = reads(account_by_name)
    list_accounts = reads(list_accounts)
    add_sign_in_token = writes(add_sign_in_token)
    sign_in_token_by_hash = reads(sign_in_token_by_hash)
    list_sign_in_tokens = reads(list_sign_in_tokens)
    revoke_account = writes(revoke_account)
    revoke_sign_in_token = writes(revoke_sign_in_token)
    create_web_session = writes(create_web_session)
    signed_in = reads(signed_in)
    end_web_session = writes(end_web_session)

    async def live_sessions(self, session_ids: list[str], now: float) -> set[str]:
        ids = list(dict.fromkeys(session_ids))
        return await self._db.read(lambda c: live_sessions(c, ids, now))
