"""The ``Accounts`` role over SQLite: users, sign-in tokens and browser sessions (hashes only).

Functions take a connection, so ``chatgate user`` can write through a connection of its
own beside a running gateway (a side store, ``SqliteStore.beside``), as ``chatgate api-key`` does.
"""

from __future__ import annotations

import sqlite3

from chatgate.domain.accounts import Account, SignedIn, SignInToken, WebSession
from chatgate.store.rows import ACCOUNT, TOKEN, WEB_SESSION, account_of, token_of, web_session_of
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads, writes


def create_account(conn: sqlite3.Connection, account: Account, password_hash: str | None) -> bool:
    cur = conn.execute(
        "INSERT INTO accounts (user_id, name, role, password_hash, created_at, revoked_at)"
        " VALUES (?,?,?,?,?,?) ON CONFLICT DO NOTHING",
        (account.user_id, account.name, account.role, password_hash, account.created_at, account.revoked_at),
    )
    return cur.rowcount > 0


def account_by_name(conn: sqlite3.Connection, name: str) -> tuple[Account, str | None] | None:
    row = conn.execute(
        f"SELECT {ACCOUNT}, a.password_hash FROM accounts a WHERE a.name = ?", (name,)
    ).fetchone()
    return None if row is None else (account_of(row), None if row[5] is None else str(row[5]))


def list_accounts(conn: sqlite3.Connection) -> list[Account]:
    rows = conn.execute(f"SELECT {ACCOUNT} FROM accounts a ORDER BY a.created_at, a.name").fetchall()
    return [account_of(r) for r in rows]


def add_sign_in_token(conn: sqlite3.Connection, token: SignInToken, token_hash: str) -> None:
    conn.execute(
        "INSERT INTO sign_in_tokens (token_id, user_id, token_hash, created_at, revoked_at)"
        " VALUES (?,?,?,?,?)",
        (token.token_id, token.user_id, token_hash, token.created_at, token.revoked_at),
    )


def sign_in_token_by_hash(conn: sqlite3.Connection, token_hash: str) -> tuple[SignInToken, Account] | None:
    row = conn.execute(
        f"SELECT {TOKEN}, {ACCOUNT} FROM sign_in_tokens t JOIN accounts a ON a.user_id = t.user_id"
        " WHERE t.token_hash = ?",
        (token_hash,),
    ).fetchone()
    return None if row is None else (token_of(row[:4]), account_of(row[4:]))


def list_sign_in_tokens(conn: sqlite3.Connection) -> list[SignInToken]:
    rows = conn.execute(f"SELECT {TOKEN} FROM sign_in_tokens t ORDER BY t.created_at, t.token_id").fetchall()
    return [token_of(r) for r in rows]


def revoke_account(conn: sqlite3.Connection, user_id: str, now: float) -> bool:
    cur = conn.execute(
        "UPDATE accounts SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL", (now, user_id)
    )
    conn.execute(
        "UPDATE sign_in_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL", (now, user_id)
    )
    conn.execute(
        "UPDATE web_sessions SET ended_at = ? WHERE user_id = ? AND ended_at IS NULL", (now, user_id)
    )
    return cur.rowcount > 0


def revoke_sign_in_token(conn: sqlite3.Connection, token_id: str, now: float) -> bool:
    cur = conn.execute(
        "UPDATE sign_in_tokens SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL", (now, token_id)
    )
    conn.execute("UPDATE web_sessions SET ended_at = ? WHERE via = ? AND ended_at IS NULL", (now, token_id))
    return cur.rowcount > 0


def create_web_session(conn: sqlite3.Connection, session: WebSession, cookie_hash: str) -> None:
    conn.execute(
        "INSERT INTO web_sessions (session_id, user_id, cookie_hash, via, created_at, expires_at, ended_at)"
        " VALUES (?,?,?,?,?,?,?)",
        (
            session.session_id,
            session.user_id,
            cookie_hash,
            session.via,
            session.created_at,
            session.expires_at,
            session.ended_at,
        ),
    )


def signed_in(conn: sqlite3.Connection, cookie_hash: str, now: float) -> SignedIn | None:
    row = conn.execute(
        f"SELECT {WEB_SESSION}, {ACCOUNT} FROM web_sessions s JOIN accounts a ON a.user_id = s.user_id"
        " WHERE s.cookie_hash = ? AND s.ended_at IS NULL AND s.expires_at > ? AND a.revoked_at IS NULL",
        (cookie_hash, now),
    ).fetchone()
    return None if row is None else SignedIn(web_session_of(row[:6]), account_of(row[6:]))


def end_web_session(conn: sqlite3.Connection, session_id: str, now: float) -> bool:
    cur = conn.execute(
        "UPDATE web_sessions SET ended_at = ? WHERE session_id = ? AND ended_at IS NULL AND expires_at > ?",
        (now, session_id, now),
    )
    return cur.rowcount > 0


def live_sessions(conn: sqlite3.Connection, session_ids: list[str], now: float) -> set[str]:
    if not session_ids:
        return set()
    marks = ",".join("?" * len(session_ids))
    rows = conn.execute(
        f"SELECT s.session_id FROM web_sessions s JOIN accounts a ON a.user_id = s.user_id"
        f" WHERE s.session_id IN ({marks}) AND s.ended_at IS NULL AND s.expires_at > ?"
        " AND a.revoked_at IS NULL",
        (*session_ids, now),
    ).fetchall()
    return {str(r[0]) for r in rows}


class SqliteAccounts(SqliteRole):
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
