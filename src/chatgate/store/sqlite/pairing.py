"""The pairing role over SQLite: its statements; the rules are ``store.pairing_rules``.

The single writer runs each rule alone, so its read-then-write needs no lock of its own.
"""

from __future__ import annotations

import sqlite3

from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.pairing import PairedUser, PairingApproval, PairingIssue, PairingLimits, PairingRequest
from chatgate.store import pairing_rules as rules
from chatgate.store.inline import run_inline
from chatgate.store.pairing_rules import NoticeFor
from chatgate.store.rows import PAIRED_USER, PAIRING_REQUEST, paired_user_of, pairing_request_of
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads, writes
from chatgate.store.sqlite.outbox import insert_outbox

_GUARD = "approve"


class PairingSql(rules.PairingStatements):
    """``PairingStatements`` on one connection (each completes at once: see ``run_inline``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._c = conn

    async def drop_expired(self, platform: str, now: float) -> None:
        self._c.execute(
            "DELETE FROM pairing_requests WHERE platform = ? AND expires_at <= ?", (platform, now)
        )

    async def request_of(self, platform: str, user_id: str) -> tuple[PairingRequest, float] | None:
        row = self._c.execute(
            f"SELECT {PAIRING_REQUEST}, last_reply_at FROM pairing_requests"
            " WHERE platform = ? AND user_id = ?",
            (platform, user_id),
        ).fetchone()
        return None if row is None else (pairing_request_of(row[:-1]), float(row[-1]))

    async def note_reply(self, platform: str, user_id: str, now: float) -> None:
        self._c.execute(
            "UPDATE pairing_requests SET last_reply_at = ? WHERE platform = ? AND user_id = ?",
            (now, platform, user_id),
        )

    async def live_requests(self, platform: str) -> int:
        sql = "SELECT COUNT(*) FROM pairing_requests WHERE platform = ?"
        return int(self._c.execute(sql, (platform,)).fetchone()[0])

    async def codes(self) -> set[str]:
        return {str(r[0]) for r in self._c.execute("SELECT code FROM pairing_requests")}

    async def insert_request(self, request: PairingRequest, now: float) -> None:
        r = request
        self._c.execute(
            f"INSERT INTO pairing_requests ({PAIRING_REQUEST}, last_reply_at) VALUES (?,?,?,?,?,?,?,?)",
            (r.code, r.platform, r.user_id, r.user_name, r.chat_id, r.created_at, r.expires_at, now),
        )

    async def request_by_code(self, code: str) -> PairingRequest | None:
        sql = f"SELECT {PAIRING_REQUEST} FROM pairing_requests WHERE code = ?"
        row = self._c.execute(sql, (code,)).fetchone()
        return None if row is None else pairing_request_of(row)

    async def delete_request(self, code: str) -> None:
        self._c.execute("DELETE FROM pairing_requests WHERE code = ?", (code,))

    async def pair(self, user: PairedUser) -> None:
        self._c.execute(
            "INSERT INTO paired_users (platform, user_id, user_name, code, approved_at) VALUES (?,?,?,?,?)"
            " ON CONFLICT (platform, user_id) DO UPDATE SET user_name = excluded.user_name,"
            " code = excluded.code, approved_at = excluded.approved_at",
            (user.platform, user.user_id, user.user_name, user.code, user.approved_at),
        )

    async def guard(self) -> tuple[int, float | None] | None:
        sql = "SELECT failures, locked_until FROM pairing_guard WHERE name = ?"
        row = self._c.execute(sql, (_GUARD,)).fetchone()
        return None if row is None else (int(row[0]), row[1])

    async def set_guard(self, failures: int, locked_until: float | None) -> None:
        self._c.execute(
            "INSERT INTO pairing_guard (name, failures, locked_until) VALUES (?,?,?) ON CONFLICT (name)"
            " DO UPDATE SET failures = excluded.failures, locked_until = excluded.locked_until",
            (_GUARD, failures, locked_until),
        )

    async def insert_outbox(self, draft: OutboxDraft, now: float) -> None:
        insert_outbox(self._c, draft, now)


def request_pairing(
    conn: sqlite3.Connection,
    platform: str,
    user_id: str,
    user_name: str | None,
    chat_id: str | None,
    now: float,
    limits: PairingLimits,
    notice_for: NoticeFor,
) -> PairingIssue:
    sql = PairingSql(conn)
    return run_inline(
        rules.request_pairing(sql, platform, user_id, user_name, chat_id, now, limits, notice_for)
    )


def approve_pairing(
    conn: sqlite3.Connection, code: str, now: float, limits: PairingLimits
) -> PairingApproval:
    return run_inline(rules.approve_pairing(PairingSql(conn), code, now, limits))


def revoke_pairing(conn: sqlite3.Connection, platform: str, user_id: str) -> bool:
    gone = conn.execute(
        "DELETE FROM paired_users WHERE platform = ? AND user_id = ?", (platform, user_id)
    ).rowcount
    conn.execute("DELETE FROM pairing_requests WHERE platform = ? AND user_id = ?", (platform, user_id))
    return gone > 0


def paired_users(conn: sqlite3.Connection, platform: str | None = None) -> list[PairedUser]:
    sql = f"SELECT {PAIRED_USER} FROM paired_users"
    rows = (
        conn.execute(sql + " ORDER BY approved_at, user_id")
        if platform is None
        else conn.execute(sql + " WHERE platform = ? ORDER BY approved_at, user_id", (platform,))
    )
    return [paired_user_of(r) for r in rows.fetchall()]


def pending_pairings(conn: sqlite3.Connection, now: float) -> list[PairingRequest]:
    rows = conn.execute(
        f"SELECT {PAIRING_REQUEST} FROM pairing_requests WHERE expires_at > ? ORDER BY created_at, code",
        (now,),
    )
    return [pairing_request_of(r) for r in rows.fetchall()]


class SqlitePairing(SqliteRole):
    """``Pairing``: each write is one transaction of the store's writer."""

    request_pairing = writes(request_pairing)
    approve_pairing = writes(approve_pairing)
    revoke_pairing = writes(revoke_pairing)
    paired_users = reads(paired_users)
    pending_pairings = reads(pending_pairings)
