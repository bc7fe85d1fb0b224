"""The pairing role over SQLite: strangers' codes, approved users, the approval lockout.

The functions take a connection, so the same SQL serves the store (through its writer
thread) and the ``chatgate pairing`` command, which runs while a gateway owns the
database and so cannot open a store: it writes through a connection of its own
(``offline``); the gateway's readers see the commit at once (WAL).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.pairing import (
    ApproveOutcome,
    PairedUser,
    PairingApproval,
    PairingIssue,
    PairingLimits,
    PairingRequest,
    new_code,
    normalize_code,
)
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.outbox import insert_outbox
from chatgate.store.sqlite.schema import SCHEMA_VERSION

T = TypeVar("T")
NoticeFor = Callable[[PairingRequest], OutboxDraft]
_REQUEST_COLUMNS = "code, platform, user_id, user_name, chat_id, created_at, expires_at"
_GUARD = "approve"


def _request(row: tuple[object, ...]) -> PairingRequest:
    return PairingRequest(*row)  # type: ignore[arg-type]


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
    conn.execute("DELETE FROM pairing_requests WHERE platform = ? AND expires_at <= ?", (platform, now))
    found = conn.execute(
        f"SELECT {_REQUEST_COLUMNS}, last_reply_at FROM pairing_requests WHERE platform = ? AND user_id = ?",
        (platform, user_id),
    ).fetchone()
    if found is not None:
        request = _request(found[:-1])
        if now - found[-1] < limits.reply_interval_seconds:
            return PairingIssue(request, replied=False)
        conn.execute(
            "UPDATE pairing_requests SET last_reply_at = ? WHERE platform = ? AND user_id = ?",
            (now, platform, user_id),
        )
        insert_outbox(conn, notice_for(request), now)
        return PairingIssue(request, replied=True)
    (live,) = conn.execute("SELECT COUNT(*) FROM pairing_requests WHERE platform = ?", (platform,)).fetchone()
    if live >= limits.max_pending:
        return PairingIssue(None, replied=False)
    taken = {r[0] for r in conn.execute("SELECT code FROM pairing_requests")}
    code = new_code()
    while code in taken:  # 31^8 codes, at most a few hundred live: this almost never loops
        code = new_code()
    request = PairingRequest(code, platform, user_id, user_name, chat_id, now, now + limits.code_ttl_seconds)
    conn.execute(
        f"INSERT INTO pairing_requests ({_REQUEST_COLUMNS}, last_reply_at) VALUES (?,?,?,?,?,?,?,?)",
        (code, platform, user_id, user_name, chat_id, now, request.expires_at, now),
    )
    insert_outbox(conn, notice_for(request), now)
    return PairingIssue(request, replied=True)


def _guard(conn: sqlite3.Connection, now: float) -> tuple[int, float | None]:
    sql = "SELECT failures, locked_until FROM pairing_guard WHERE name = ?"
    row = conn.execute(sql, (_GUARD,)).fetchone()
    if row is None:
        return 0, None
    failures, locked_until = int(row[0]), row[1]
    if locked_until is not None and now >= locked_until:
        return 0, None  # the lockout is over; counting starts again
    return failures, locked_until


def _set_guard(conn: sqlite3.Connection, failures: int, locked_until: float | None) -> None:
    conn.execute(
        "INSERT INTO pairing_guard (name, failures, locked_until) VALUES (?,?,?) ON CONFLICT (name)"
        " DO UPDATE SET failures = excluded.failures, locked_until = excluded.locked_until",
        (_GUARD, failures, locked_until),
    )


def approve_pairing(
    conn: sqlite3.Connection, code: str, now: float, limits: PairingLimits
) -> PairingApproval:
    failures, locked_until = _guard(conn, now)
    if locked_until is not None:
        return PairingApproval("locked", locked_until=locked_until, failures=failures)
    wanted = normalize_code(code)
    found = conn.execute(
        f"SELECT {_REQUEST_COLUMNS} FROM pairing_requests WHERE code = ?", (wanted,)
    ).fetchone()
    request = _request(found) if found is not None else None
    if request is None or request.expires_at <= now:
        failures += 1
        lock = now + limits.lockout_seconds if failures >= limits.max_failed_approvals else None
        _set_guard(conn, failures, lock)
        if request is not None:
            conn.execute("DELETE FROM pairing_requests WHERE code = ?", (wanted,))
        outcome: ApproveOutcome = "unknown" if request is None else "expired"
        return PairingApproval(outcome, locked_until=lock, failures=failures)
    conn.execute(
        "INSERT INTO paired_users (platform, user_id, user_name, code, approved_at) VALUES (?,?,?,?,?)"
        " ON CONFLICT (platform, user_id) DO UPDATE SET user_name = excluded.user_name,"
        " code = excluded.code, approved_at = excluded.approved_at",
        (request.platform, request.user_id, request.user_name, request.code, now),
    )
    conn.execute("DELETE FROM pairing_requests WHERE code = ?", (wanted,))
    _set_guard(conn, 0, None)
    user = PairedUser(request.platform, request.user_id, request.user_name, now, request.code)
    return PairingApproval("approved", user=user)


def revoke_pairing(conn: sqlite3.Connection, platform: str, user_id: str) -> bool:
    gone = conn.execute(
        "DELETE FROM paired_users WHERE platform = ? AND user_id = ?", (platform, user_id)
    ).rowcount
    conn.execute("DELETE FROM pairing_requests WHERE platform = ? AND user_id = ?", (platform, user_id))
    return gone > 0


def paired_users(conn: sqlite3.Connection, platform: str | None) -> list[PairedUser]:
    sql = "SELECT platform, user_id, user_name, approved_at, code FROM paired_users"
    rows = (
        conn.execute(sql + " ORDER BY approved_at, user_id")
        if platform is None
        else conn.execute(sql + " WHERE platform = ? ORDER BY approved_at, user_id", (platform,))
    )
    return [PairedUser(*r) for r in rows.fetchall()]


def pending_pairings(conn: sqlite3.Connection, now: float) -> list[PairingRequest]:
    rows = conn.execute(
        f"SELECT {_REQUEST_COLUMNS} FROM pairing_requests WHERE expires_at > ? ORDER BY created_at, code",
        (now,),
    )
    return [_request(r) for r in rows.fetchall()]


class SqlitePairing(SqliteRole):
    """``Pairing``: each write is one transaction of the store's writer."""

    async def request_pairing(
        self,
        platform: str,
        user_id: str,
        user_name: str | None,
        chat_id: str | None,
        now: float,
        limits: PairingLimits,
        notice_for: NoticeFor,
    ) -> PairingIssue:
        return await self._db.write(
            lambda c: request_pairing(c, platform, user_id, user_name, chat_id, now, limits, notice_for)
        )

    async def approve_pairing(self, code: str, now: float, limits: PairingLimits) -> PairingApproval:
        return await self._db.write(lambda c: approve_pairing(c, code, now, limits))

    async def revoke_pairing(self, platform: str, user_id: str) -> bool:
        return await self._db.write(lambda c: revoke_pairing(c, platform, user_id))

    async def paired_users(self, platform: str | None = None) -> list[PairedUser]:
        return await self._db.read(lambda c: paired_users(c, platform))

    async def pending_pairings(self, now: float) -> list[PairingRequest]:
        return await self._db.read(lambda c: pending_pairings(c, now))


@contextlib.contextmanager
def _offline_connection(path: Path) -> Iterator[sqlite3.Connection]:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=30.0, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot open {path}: {exc}") from exc
    try:
        conn.execute("PRAGMA busy_timeout = 30000")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            raise StoreUnavailable(
                f"{path} has schema v{version}; this chatgate uses v{SCHEMA_VERSION}."
                " Start the gateway of this version once (it upgrades the file), then run this again."
            )
        yield conn
    finally:
        conn.close()


def offline(path: Path, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``fn`` in one committed transaction on a connection of its own, beside a running
    gateway (SQLite serializes it with the gateway's writer; the busy timeout waits)."""
    with _offline_connection(path) as conn:
        try:
            conn.execute("BEGIN IMMEDIATE")
            result = fn(conn)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise StoreUnavailable(f"{path}: {exc}") from exc
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        return result
