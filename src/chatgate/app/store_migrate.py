"""``chatgate store migrate --to postgresql://…``: a SQLite state directory into PostgreSQL.

The SQLite file must not be in use (its store lock is taken for the whole copy, so a
gateway cannot start on it meanwhile) and the target schema must be empty. Everything is
copied in one PostgreSQL transaction: a migration that fails leaves the target empty.
What a dead process held is handed back on the way: leases are dropped, rows left
``sending`` become ``pending`` possible duplicates; items claimed by a turn keep their
claim, so the first claim on PostgreSQL blames a death during an isolated turn as a
restart on SQLite would. Imported only by the command: asyncpg is the ``postgres`` extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import asyncpg
import msgspec

from chatgate.domain.errors import ChatgateError, StoreUnavailable
from chatgate.store.media_rules import blob_path
from chatgate.store.postgres import PostgresStore
from chatgate.store.postgres.media import write_blob
from chatgate.store.sqlite.schema import SCHEMA_VERSION as SQLITE_VERSION

Row = tuple[Any, ...]
CHUNK = 2000


class Table(msgspec.Struct, frozen=True):
    name: str
    columns: tuple[str, ...]
    """The SQLite columns read, in order; the PostgreSQL columns written are ``columns + extra``."""
    extra: tuple[str, ...] = ()
    convert: Callable[[Row], Row] | None = None
    order: str = "rowid"
    identity: str | None = None


def _session(row: Row) -> Row:
    scope = json.loads(row[4]).get("scope_id") or ""
    return (*row, scope)


def _inbox(row: Row) -> Row:
    return (*row[:11], bool(row[11]), row[12])


def _outbox(row: Row) -> Row:
    status, duplicate = row[9], bool(row[11])
    if status == "sending":  # the process that was sending it is gone: send again, flagged
        status, duplicate = "pending", True
    return (*row[:9], status, row[10], duplicate, *row[12:])


def _schedule(row: Row) -> Row:
    return (*row[:8], bool(row[8]), bool(row[9]), *row[10:])


TABLES: tuple[Table, ...] = (
    Table(
        "sessions",
        ("key", "session_id", "platform", "chat_id", "source_json", "created_at", "last_activity",
         "retry_at", "last_error", "preview_message_id"),
        extra=("scope",), convert=_session,
    ),
    Table(
        "inbox",
        ("seq", "transport", "delivery_id", "session_key", "status", "attempts", "inbound_json",
         "admitted_at", "finished_at", "outcome", "claimed_by", "isolated", "crashes"),
        convert=_inbox, order="seq", identity="seq",
    ),
    Table(
        "transcript", ("id", "session_id", "session_key", "role", "content", "created_at", "media_json"),
        order="id", identity="id",
    ),
    Table(
        "outbox",
        ("id", "idem_key", "platform", "chat_id", "session_key", "kind", "text", "in_reply_to",
         "target_json", "status", "attempts", "possibly_duplicate", "platform_message_id", "created_at",
         "next_attempt_at", "sent_at", "confirmed_at", "last_error"),
        convert=_outbox, order="id", identity="id",
    ),
    Table("chat_labels", ("platform", "scope", "chat_id", "chat_name", "chat_topic", "observed_seq")),
    Table("cursors", ("name", "value", "updated_at")),
    Table(
        "media",
        ("key", "sha", "mime", "size", "name", "error", "transcript", "transcript_error", "owner",
         "created_at"),
    ),
    Table("gateway_keys", ("name", "value", "created_at")),
    Table(
        "rejected_inbound", ("id", "transport", "delivery_id", "reason", "excerpt", "received_at"),
        order="id", identity="id",
    ),
    Table(
        "approvals",
        ("prompt_id", "session_key", "session_id", "inbox_seq", "call_id", "tool", "command", "rule_keys",
         "offered_tiers", "requester_id", "requester_name", "requested_at", "expires_at", "platform",
         "chat_id", "target_json", "reply_to", "prompt_text", "prompt_via", "state", "tier", "reason",
         "answered_by_id", "answered_by_name", "answered_at", "prompt_message_id"),
    ),
    Table(
        "approval_grants",
        ("scope", "session_key", "session_id", "rule_key", "command", "prompt_id", "granted_at"),
    ),
    Table(
        "pairing_requests",
        ("platform", "user_id", "code", "user_name", "chat_id", "created_at", "expires_at", "last_reply_at"),
    ),
    Table("paired_users", ("platform", "user_id", "user_name", "code", "approved_at")),
    Table("pairing_guard", ("name", "failures", "locked_until")),
    Table("api_keys", ("key_id", "name", "token_hash", "created_at", "revoked_at")),
    Table(
        "schedules",
        ("id", "origin", "name", "kind", "spec", "text", "target_json", "session_key", "deliver_only",
         "paused", "next_fire_at", "last_fired_at", "fired", "created_at", "meta_json"),
        convert=_schedule,
    ),
    Table(
        "tasks",
        ("id", "kind", "parent_key", "parent_session_id", "child_key", "origin_json", "prompt", "created_at",
         "status", "result", "finished_at", "note"),
    ),
    Table("accounts", ("user_id", "name", "role", "password_hash", "created_at", "revoked_at")),
    Table("sign_in_tokens", ("token_id", "user_id", "token_hash", "created_at", "revoked_at")),
    Table(
        "web_sessions",
        ("session_id", "user_id", "cookie_hash", "via", "created_at", "expires_at", "ended_at"),
    ),
    Table("web_chats", ("platform", "chat_id", "owner_id", "title", "created_at")),
    Table("session_profiles", ("session_key", "profile", "updated_at")),
)  # fmt: skip


class MigrationRefused(ChatgateError):
    """The migration cannot start; the message says what to do."""


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[sqlite3.Connection]:
    """The SQLite file, read-only, with its store lock held: no gateway runs on it meanwhile."""
    if not path.exists():
        raise MigrationRefused(f"there is no database at {path} (check --state-dir or store.sqlite.path)")
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise MigrationRefused(
                f"{path} is open in a running gateway; stop it (chatgate stop) and run this again"
            ) from None
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != SQLITE_VERSION:
                raise MigrationRefused(
                    f"{path} has schema v{version}; this chatgate migrates v{SQLITE_VERSION}. Start this"
                    " chatgate's gateway on it once (it upgrades the file), stop it, then migrate"
                )
            yield conn
        finally:
            conn.close()
    finally:
        os.close(fd)


class Progress:
    """A one-line progress bar on a terminal; a line per table otherwise."""

    def __init__(self, total: int, out: TextIO) -> None:
        self.total, self.done, self.out = max(total, 1), 0, out
        self.tty = out.isatty()

    def advance(self, table: str, rows: int) -> None:
        self.done += rows
        if not self.tty:
            return
        filled = 30 * self.done // self.total
        bar = "#" * filled + "-" * (30 - filled)
        self.out.write(f"\r[{bar}] {self.done}/{self.total} rows ({table})   ")
        self.out.flush()

    def table_done(self, table: str, rows: int) -> None:
        if self.tty:
            return
        self.out.write(f"{table}: {rows} rows ({self.done}/{self.total})\n")

    def finish(self) -> None:
        if self.tty:
            self.out.write("\n")


def _chunks(conn: sqlite3.Connection, table: Table) -> Iterator[list[Row]]:
    cursor = conn.execute(f"SELECT {', '.join(table.columns)} FROM {table.name} ORDER BY {table.order}")
    while rows := cursor.fetchmany(CHUNK):
        yield [table.convert(r) if table.convert else tuple(r) for r in rows]


async def _refuse_unless_empty(conn: asyncpg.Connection, schema: str) -> None:
    for name in ("sessions", "inbox", "outbox", "transcript"):
        if await conn.fetchval(f"SELECT EXISTS (SELECT 1 FROM {name})"):
            raise MigrationRefused(
                f"schema {schema} already holds chatgate data ({name} is not empty); migrate into an"
                " empty schema (store.postgres.schema) so nothing is merged by accident"
            )


async def _copy(conn: asyncpg.Connection, source: sqlite3.Connection, progress: Progress) -> dict[str, int]:
    copied: dict[str, int] = {}
    for table in TABLES:
        count = 0
        chunks = _chunks(source, table)
        while (rows := await asyncio.to_thread(next, chunks, None)) is not None:
            columns = [*table.columns, *table.extra]
            await conn.copy_records_to_table(table.name, records=rows, columns=columns)
            count += len(rows)
            progress.advance(table.name, len(rows))
        if table.identity is not None:
            await conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table.name}', '{table.identity}'),"
                f" GREATEST((SELECT MAX({table.identity}) FROM {table.name}), 1))"
            )
        copied[table.name] = count
        progress.table_done(table.name, count)
    return copied


async def _copy_blobs(conn: asyncpg.Connection, source: sqlite3.Connection, blobs: Path | None) -> int:
    """The blob files the ``media`` rows name, as PostgreSQL's chunk rows (a file that is gone
    stays gone: the model reads that it is no longer stored)."""
    if blobs is None:
        return 0
    shas = [r[0] for r in source.execute("SELECT DISTINCT sha FROM media WHERE sha IS NOT NULL")]
    copied = 0
    for sha in shas:
        path = blob_path(blobs, sha)
        if await asyncio.to_thread(path.is_file):
            await write_blob(conn, sha, str(path))
            copied += 1
    return copied


async def migrate(
    source: sqlite3.Connection, target: PostgresStore, out: TextIO, blobs: Path | None = None
) -> dict[str, int]:
    """Copy every table of ``source`` (and the blob files under ``blobs``) into ``target``'s
    (empty) schema in one transaction."""
    await target.open()  # creates the schema and its tables
    await target.close()
    conn: asyncpg.Connection = await asyncpg.connect(
        target.dsn, password=target.password, server_settings={"search_path": target.schema}
    )
    try:
        await _refuse_unless_empty(conn, target.schema)
        total = sum(source.execute(f"SELECT COUNT(*) FROM {t.name}").fetchone()[0] for t in TABLES)
        progress = Progress(total, out)
        async with conn.transaction():
            copied = await _copy(conn, source, progress)
            copied["media_blobs"] = await _copy_blobs(conn, source, blobs)
        progress.finish()
        return copied
    finally:
        await conn.close()


def run_migration(path: Path, target: PostgresStore, out: TextIO = sys.stderr) -> dict[str, int]:
    """The whole command: raises ``MigrationRefused`` or ``StoreUnavailable`` with what to do."""
    with exclusive(path) as source:
        try:
            return asyncio.run(migrate(source, target, out, path.parent / "blobs"))
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StoreUnavailable(f"postgresql: {exc}; nothing was migrated") from exc


def migrate_into(path: Path, url: str, *, schema: str, password: str | None) -> dict[str, int]:
    """``run_migration`` into the schema ``schema`` at ``url`` (what ``chatgate store migrate`` runs)."""
    return run_migration(path, PostgresStore(url, schema=schema, password=password, pool_size=1))
