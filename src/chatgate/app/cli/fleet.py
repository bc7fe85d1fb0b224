"""The CLI's view of a PostgreSQL store: sessions, the fleet, pairing, API keys and schedules,
read and changed beside running gateways.

A fleet shares one database, so a command opens a store of its own (a small pool) next
to the gateways, asks, and closes it. Imported only when ``store.url`` is set: asyncpg is
the ``postgres`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from chatgate.app.cli.pairing import print_list, say_approval
from chatgate.app.config.model import GatewayConfig, postgres_url_problem
from chatgate.app.startup import build_postgres_store
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.pairing import PairedUser, PairingRequest
from chatgate.domain.sessions import SessionInfo
from chatgate.store.base import Store

T = TypeVar("T")
EX_USAGE = 64


def with_store(config: GatewayConfig, fn: Callable[[Store], Awaitable[T]]) -> T:
    """Open the configured PostgreSQL store, run ``fn`` on it, close it (raises ``StoreUnavailable``)."""

    async def run() -> T:
        store = build_postgres_store(config)
        await store.open()
        try:
            return await fn(store)
        finally:
            await store.close()

    return asyncio.run(run())


def fleet_members(config: GatewayConfig) -> list[dict[str, object]]:
    """Every gateway process on the configured PostgreSQL schema (``chatgate status``)."""

    async def members(store: Store) -> list[dict[str, object]]:
        from chatgate.store.postgres import PostgresStore

        assert isinstance(store, PostgresStore)
        return await store.fleet()

    return with_store(config, members)


def postgres_sessions(config: GatewayConfig, limit: int) -> list[SessionInfo]:
    return with_store(config, lambda s: s.list_sessions(limit))


def postgres_pairing(args: argparse.Namespace, config: GatewayConfig) -> int:
    """``chatgate pairing list|approve|revoke`` on the fleet's database (every gateway sees it)."""
    now = time.time()
    if args.pairing_command == "approve":
        limits = config.pairing.limits()
        result = with_store(config, lambda s: s.approve_pairing(args.code, now, limits))
        return say_approval(result, args.code, limits.max_failed_approvals)
    if args.pairing_command == "revoke":
        return with_store(config, lambda s: _revoke(s, args.user, args.platform))

    async def listing(store: Store) -> tuple[list[PairingRequest], list[PairedUser]]:
        return await store.pending_pairings(now), await store.paired_users(None)

    pending, paired = with_store(config, listing)
    return print_list(pending, paired, now)


async def _revoke(store: Store, user: str, platform: str | None) -> int:
    paired = await store.paired_users(platform)
    platforms = sorted({u.platform for u in paired if u.user_id == user})
    if not platforms:
        where = f" on {platform}" if platform else ""
        print(f"chatgate: user {user} is not paired{where} (see `chatgate pairing list`)", file=sys.stderr)
        return 1
    for name in platforms:
        await store.revoke_pairing(name, user)
        print(f"Revoked {name} user {user}: their next message is refused (or offered a new code).")
    return 0


def postgres_api_key(args: argparse.Namespace, config: GatewayConfig) -> int:
    """``chatgate api-key create|list|revoke`` on the fleet's database (every gateway reads it)."""
    from chatgate.app.cli import api_keys as cli
    from chatgate.domain.api_keys import ApiKeyRecord, hash_token, new_api_key

    if args.api_key_command == "list":
        return cli.print_keys(with_store(config, lambda s: s.list_api_keys()))
    if args.api_key_command == "revoke":
        key_id = args.key_id
        if not cli.key_id_ok(key_id):
            return 1
        return cli.say_revoked(with_store(config, lambda s: s.revoke_api_key(key_id, time.time())), key_id)
    key_id, token = new_api_key()
    record = ApiKeyRecord(key_id, args.name, time.time())
    with_store(config, lambda s: s.create_api_key(record, hash_token(token)))
    return cli.say_created(key_id, args.name, token, config)


def postgres_schedules(args: argparse.Namespace, config: GatewayConfig) -> int:
    """``chatgate schedules list|pause|resume|delete`` on the fleet's database."""
    from chatgate.app.cli.schedules import print_schedules, say_changed

    verb = args.schedules_command
    if verb == "list":
        return print_schedules(with_store(config, lambda s: s.list_schedules()))
    sid = args.id

    async def change(store: Store) -> bool:
        if verb == "delete":
            return await store.delete_schedule(sid)
        return await store.pause_schedule(sid, verb == "pause")

    return say_changed(with_store(config, change), verb, sid)


def cmd_store_migrate(args: argparse.Namespace, config: GatewayConfig, sqlite_path: Path) -> int:
    """``chatgate store migrate --to URL``: the SQLite state, copied with a progress bar."""
    from chatgate.app.store_migrate import MigrationRefused, run_migration
    from chatgate.store.postgres import PostgresStore

    try:
        url = postgres_url_problem(args.to)
    except ValueError as exc:
        print(f"chatgate: --to {exc}", file=sys.stderr)
        return EX_USAGE
    password_env = args.password_env or config.store.password_env
    password = os.environ.get(password_env) if password_env else None
    if password_env and password is None:
        print(f"chatgate: environment variable {password_env} is not set (the password)", file=sys.stderr)
        return EX_USAGE
    schema = args.schema or config.store.postgres.schema_
    target = PostgresStore(url, schema=schema, password=password, pool_size=1)
    try:
        copied = run_migration(sqlite_path, target)
    except (MigrationRefused, StoreUnavailable) as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return 1
    rows = sum(copied.values())
    print(
        f"migrated {rows} rows of {sqlite_path} into {url} (schema {schema}):"
        f" {copied['sessions']} sessions, {copied['inbox']} messages, {copied['outbox']} replies."
        f" Set store.url: {url} (and store.postgres.schema: {schema}) in every gateway's config."
    )
    return 0
