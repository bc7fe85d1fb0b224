"""``chatgate api-key create|list|revoke``: bearer keys of the OpenAI-compatible API.

Like ``chatgate pairing`` it runs beside a running gateway, writing through a connection
of its own (to the SQLite file, or to the fleet's PostgreSQL schema when ``store.url`` is
set); the gateway reads the key table on every request, so a new key works and a revoked
one stops at once. Only a hash of each token is stored; ``create`` prints the
token, once.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

from chatgate.app.cli.pairing import database_path
from chatgate.app.config import GatewayConfig
from chatgate.domain.api_keys import KEY_ID_RE, ApiKeyRecord, hash_token, new_api_key
from chatgate.domain.errors import StoreUnavailable


async def _create_database(path: Path) -> None:
    from chatgate.store.sqlite import SqliteStore

    store = SqliteStore(path)
    await store.open()
    await store.close()


def cmd_create(path: Path, name: str, config: GatewayConfig) -> int:
    from chatgate.store.sqlite import api as sql
    from chatgate.store.sqlite.pairing import offline

    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        asyncio.run(_create_database(path))
    key_id, token = new_api_key()
    offline(path, lambda c: sql.create_api_key(c, ApiKeyRecord(key_id, name, time.time()), hash_token(token)))
    return say_created(key_id, name, token, config)


def say_created(key_id: str, name: str, token: str, config: GatewayConfig) -> int:
    print(f"Created API key {key_id} ({name}). This is the only time it is shown; keep it secret:\n")
    print(f"  {token}\n")
    if not config.platforms.api.enabled:
        print("The API is off in this config: set platforms.api.enabled: true (docs/api.md).")
    elif config.platforms.api.key_storage != "store":  # type: ignore[attr-defined]  # to the API plugin
        print("This config accepts only platforms.api.key_env's key: set key_storage: store to use this one.")
    return 0


def cmd_list(path: Path) -> int:
    from chatgate.store.sqlite import api as sql
    from chatgate.store.sqlite.pairing import offline

    return print_keys(offline(path, sql.list_api_keys) if path.exists() else [])


def print_keys(keys: list[ApiKeyRecord]) -> int:
    if not keys:
        print("No API keys yet; create one with: chatgate api-key create --name NAME")
        return 0
    when = "%Y-%m-%d %H:%M"
    rows = [
        (
            k.key_id,
            k.name,
            time.strftime(when, time.localtime(k.created_at)),
            "revoked " + time.strftime(when, time.localtime(k.revoked_at)) if k.revoked_at else "active",
        )
        for k in keys
    ]
    header = ("ID", "NAME", "CREATED", "STATE")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for row in (header, *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def cmd_revoke(path: Path, key_id: str) -> int:
    from chatgate.store.sqlite import api as sql
    from chatgate.store.sqlite.pairing import offline

    if not key_id_ok(key_id):
        return 1
    revoked = path.exists() and offline(path, lambda c: sql.revoke_api_key(c, key_id, time.time()))
    return say_revoked(revoked, key_id)


def key_id_ok(key_id: str) -> bool:
    if KEY_ID_RE.fullmatch(key_id):
        return True
    print(f"chatgate: {key_id!r} is not a key id (12 hex digits; see chatgate api-key list)", file=sys.stderr)
    return False


def say_revoked(revoked: bool, key_id: str) -> int:
    if not revoked:
        print(f"chatgate: no active API key {key_id} (see chatgate api-key list)", file=sys.stderr)
        return 1
    print(f"Revoked API key {key_id}: its next request is refused with 401.")
    return 0


def cmd_api_key(args: argparse.Namespace, config: GatewayConfig, state_dir: Path) -> int:
    path = database_path(config, state_dir)
    if config.store.url is not None:  # the fleet's keys are in its PostgreSQL schema
        from chatgate.app.cli.fleet import postgres_api_key

        commands = {args.api_key_command: lambda: postgres_api_key(args, config)}
    else:
        commands = {
            "create": lambda: cmd_create(path, args.name, config),
            "list": lambda: cmd_list(path),
            "revoke": lambda: cmd_revoke(path, args.key_id),
        }
    try:
        return commands[args.api_key_command]()
    except StoreUnavailable as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return 1


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
) -> None:
    keys = sub.add_parser("api-key", help="bearer keys of the OpenAI-compatible API")
    keys.set_defaults(func=run)
    keys_sub = keys.add_subparsers(dest="api_key_command", required=True)
    create = keys_sub.add_parser("create", help="make a key and print it (once)")
    common(create)
    create.add_argument("--name", default="default", help="what the key is for (shown by list)")
    listing = keys_sub.add_parser("list", help="every key with its state (tokens are never shown)")
    common(listing)
    revoke = keys_sub.add_parser("revoke", help="refuse a key from now on")
    common(revoke)
    revoke.add_argument("key_id", help="the key's id, as chatgate api-key list shows it")
