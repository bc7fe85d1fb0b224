"""``chatgate api-key create|list|revoke``: bearer keys of the OpenAI-compatible API.

Like ``chatgate pairing`` it runs beside a running gateway through a store of its own
(``CommandTools.open_store``); the gateway reads the key table on every request, so a new key works
and a revoked one stops at once. Only a hash of each token is stored; ``create`` prints the
token, once.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from chatgate.domain.api_keys import KEY_ID_RE, ApiKeyRecord, hash_token, new_api_key
from chatgate.domain.errors import NoDatabaseYet, StoreUnavailable
from chatgate.domain.store_roles import ApiKeys
from chatgate.platforms.api.section import ApiSection
from chatgate.platforms.kit.plugin import CommandTools, Purpose


async def cmd_create(store: ApiKeys, name: str, section: ApiSection) -> int:
    key_id, token = new_api_key()
    await store.create_api_key(ApiKeyRecord(key_id, name, time.time()), hash_token(token))
    return say_created(key_id, name, token, section)


def say_created(key_id: str, name: str, token: str, section: ApiSection) -> int:
    print(f"Created API key {key_id} ({name}). This is the only time it is shown; keep it secret:\n")
    print(f"  {token}\n")
    if not section.enabled:
        print("The API is off in this config: set platforms.api.enabled: true (docs/api.md).")
    elif section.key_storage != "store":
        print("This config accepts only platforms.api.key_env's key: set key_storage: store to use this one.")
    return 0


async def cmd_list(store: ApiKeys) -> int:
    return print_keys(await store.list_api_keys())


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


async def cmd_revoke(store: ApiKeys, key_id: str) -> int:
    return say_revoked(await store.revoke_api_key(key_id, time.time()), key_id)


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


def cmd_api_key(args: argparse.Namespace, tools: CommandTools) -> int:
    verb = args.api_key_command
    if verb == "revoke" and not key_id_ok(args.key_id):
        return 1
    purpose: Purpose = "create" if verb == "create" else "change" if verb == "revoke" else "read"
    section = tools.section(args)
    assert isinstance(section, ApiSection)

    async def run() -> int:
        async with tools.open_store(args, purpose) as store:
            if verb == "create":
                return await cmd_create(store, args.name, section)
            if verb == "revoke":
                return await cmd_revoke(store, args.key_id)
            return await cmd_list(store)

    try:
        return asyncio.run(run())
    except NoDatabaseYet:  # no gateway has run here: no key yet
        return print_keys([]) if verb == "list" else say_revoked(False, args.key_id)
    except StoreUnavailable as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return 1


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], tools: CommandTools) -> None:
    keys = sub.add_parser(
        "api-key", help="bearer keys of the OpenAI-compatible API", description=__doc__.splitlines()[0]
    )
    keys.set_defaults(func=lambda args: cmd_api_key(args, tools))
    common = tools.common
    keys_sub = keys.add_subparsers(dest="api_key_command", required=True)
    create = keys_sub.add_parser("create", help="make a key and print it (once)")
    common(create)
    create.add_argument("--name", default="default", help="what the key is for (shown by list)")
    listing = keys_sub.add_parser("list", help="every key with its state (tokens are never shown)")
    common(listing)
    revoke = keys_sub.add_parser("revoke", help="refuse a key from now on")
    common(revoke)
    revoke.add_argument("key_id", help="the key's id, as chatgate api-key list shows it")
