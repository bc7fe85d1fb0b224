"""``chatgate store …``: store tools. ``migrate --to postgresql://…`` moves a SQLite state
into PostgreSQL (``store_migrate.py``; asyncpg is imported only when it runs)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from chatgate.app.config import GatewayConfig

StateCommand = Callable[[argparse.Namespace, Path], int]


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: Callable[[argparse.ArgumentParser], None],
    with_state: Callable[[StateCommand], Callable[[argparse.Namespace], int]],
    load: Callable[[argparse.Namespace], GatewayConfig],
    database_path: Callable[[GatewayConfig, Path], Path],
) -> None:
    def migrate_command(args: argparse.Namespace, state_dir: Path) -> int:
        from chatgate.app.cli.fleet import cmd_store_migrate

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
