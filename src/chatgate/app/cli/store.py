"""``chatgate store …``: store tools. ``migrate --to postgresql://…`` moves a SQLite state
into PostgreSQL (``app/store_migrate.py``; asyncpg is imported only when it runs)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from chatgate.app.config import GatewayConfig
from chatgate.app.config.model import postgres_url_problem
from chatgate.domain.errors import StoreUnavailable

EX_USAGE = 64

StateCommand = Callable[[argparse.Namespace, Path], int]


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: Callable[[argparse.ArgumentParser], None],
    with_state: Callable[[StateCommand], Callable[[argparse.Namespace], int]],
    load: Callable[[argparse.Namespace], GatewayConfig],
    database_path: Callable[[GatewayConfig, Path], Path],
) -> None:
    def migrate_command(args: argparse.Namespace, state_dir: Path) -> int:
        config = load(args)
        return cmd_store_migrate(args, config, database_path(config, state_dir))

    store = sub.add_parser("store", help="store tools")
    store_sub = store.add_subparsers(dest="store_command", required=True)
    migrate = store_sub.add_parser("migrate", help="copy this SQLite state into an empty PostgreSQL schema")
    common(migrate)
    migrate.add_argument("--to", required=True, help="postgresql://user@host:port/database (no password)")
    migrate.add_argument("--schema", help="the target schema (default: store.postgres.schema)")
    migrate.add_argument("--password-env", help="the env var of the password (default: store.password_env)")
    migrate.set_defaults(func=with_state(migrate_command))


def cmd_store_migrate(args: argparse.Namespace, config: GatewayConfig, sqlite_path: Path) -> int:
    """``chatgate store migrate --to URL``: the SQLite state, copied with a progress bar."""
    # asyncpg (the postgres extra) is imported only when this command runs
    from chatgate.app.store_migrate import MigrationRefused, migrate_into

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
    try:
        copied = migrate_into(sqlite_path, url, schema=schema, password=password)
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
