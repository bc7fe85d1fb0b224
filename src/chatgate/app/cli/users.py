"""``chatgate user add|token|list|revoke``: the web chat's accounts (``platforms.web.auth: accounts``).

Like ``chatgate api-key`` it runs beside a running gateway, writing through a connection
of its own (to the SQLite file, or to the fleet's PostgreSQL schema when ``store.url`` is
set). The gateway reads sessions from the store on every request and re-checks its open
sockets every few seconds, so a revocation here signs the user out everywhere.
Only hashes are stored; ``add`` and ``token`` print the sign-in token, once.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from chatgate.app.cli.pairing import database_path
from chatgate.app.config import GatewayConfig
from chatgate.domain.accounts import (
    ID_RE,
    Account,
    SignInToken,
    hash_password,
    hash_secret,
    name_problem,
    new_id,
    new_sign_in_token,
)
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.store_roles import Accounts

T = TypeVar("T")


class OfflineAccounts:
    """The part of ``Accounts`` the command uses, over a SQLite file a gateway may have open."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        from chatgate.store.sqlite.pairing import offline

        return offline(self.path, fn)

    async def create_account(self, account: Account, password_hash: str | None) -> bool:
        from chatgate.store.sqlite import accounts as sql

        if not self.path.exists():
            await _create_database(self.path)
        return self._run(lambda c: sql.create_account(c, account, password_hash))

    async def account_by_name(self, name: str) -> tuple[Account, str | None] | None:
        from chatgate.store.sqlite import accounts as sql

        return self._run(lambda c: sql.account_by_name(c, name)) if self.path.exists() else None

    async def list_accounts(self) -> list[Account]:
        from chatgate.store.sqlite import accounts as sql

        return self._run(sql.list_accounts) if self.path.exists() else []

    async def list_sign_in_tokens(self) -> list[SignInToken]:
        from chatgate.store.sqlite import accounts as sql

        return self._run(sql.list_sign_in_tokens) if self.path.exists() else []

    async def add_sign_in_token(self, token: SignInToken, token_hash: str) -> None:
        from chatgate.store.sqlite import accounts as sql

        self._run(lambda c: sql.add_sign_in_token(c, token, token_hash))

    async def revoke_account(self, user_id: str, now: float) -> bool:
        from chatgate.store.sqlite import accounts as sql

        return self._run(lambda c: sql.revoke_account(c, user_id, now))

    async def revoke_sign_in_token(self, token_id: str, now: float) -> bool:
        from chatgate.store.sqlite import accounts as sql

        return self._run(lambda c: sql.revoke_sign_in_token(c, token_id, now))


async def _create_database(path: Path) -> None:
    from chatgate.store.sqlite import SqliteStore

    path.parent.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(path)
    await store.open()
    await store.close()


def read_password() -> str:
    """Asked twice on a terminal; one line of standard input otherwise (scripts, tests)."""
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("Password: ")
    if first != getpass.getpass("Again: "):
        raise ValueError("the two passwords differ")
    return first


async def add(accounts: Any, name: str, admin: bool, password: str | None, config: GatewayConfig) -> int:
    if (problem := name_problem(name)) is not None:
        print(f"chatgate: {problem}", file=sys.stderr)
        return 2
    hashed = await asyncio.to_thread(hash_password, password) if password else None
    account = Account(new_id(), name, "admin" if admin else "user", time.time())
    if not await accounts.create_account(account, hashed):
        print(f"chatgate: there is already a user {name} (see chatgate user list)", file=sys.stderr)
        return 1
    print(f"Added {account.role} {name}" + (" with a password." if hashed else "."))
    return await _issue(accounts, account, config)


async def token(accounts: Any, name: str, config: GatewayConfig) -> int:
    found = await accounts.account_by_name(name)
    if found is None or not found[0].active:
        print(f"chatgate: no active user {name} (see chatgate user list)", file=sys.stderr)
        return 1
    return await _issue(accounts, found[0], config)


async def _issue(accounts: Any, account: Account, config: GatewayConfig) -> int:
    token_id, value = new_sign_in_token()
    await accounts.add_sign_in_token(SignInToken(token_id, account.user_id, time.time()), hash_secret(value))
    print(
        f"Sign-in token {token_id} for {account.name}. This is the only time it is shown; keep it secret:\n"
    )
    print(f"  {value}\n")
    if config.platforms.web.auth_mode() != "accounts":  # type: ignore[attr-defined]  # to the web plugin
        print("This config does not use accounts: set platforms.web.auth: accounts (docs/webchat.md).")
    return 0


def _when(at: float | None) -> str:
    return "-" if at is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(at))


async def listing(accounts: Any) -> int:
    users: list[Account] = await accounts.list_accounts()
    if not users:
        print("No users yet; add one with: chatgate user add NAME [--admin] [--password]")
        return 0
    tokens: list[SignInToken] = await accounts.list_sign_in_tokens()
    rows = []
    for user in users:
        mine = [t for t in tokens if t.user_id == user.user_id]
        active = ", ".join(t.token_id for t in mine if t.active) or "-"
        state = "active" if user.active else "revoked " + _when(user.revoked_at)
        rows.append((user.name, user.user_id, user.role, _when(user.created_at), state, active))
    header = ("NAME", "ID", "ROLE", "CREATED", "STATE", "ACTIVE TOKENS")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for row in (header, *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


async def revoke(accounts: Any, what: str) -> int:
    """A token id revokes that token (and its sessions); a name revokes the user."""
    now = time.time()
    if ID_RE.fullmatch(what) and any(t.token_id == what for t in await accounts.list_sign_in_tokens()):
        if await accounts.revoke_sign_in_token(what, now):
            print(f"Revoked sign-in token {what}; the browsers signed in with it are signed out.")
            return 0
        print(f"chatgate: sign-in token {what} is already revoked", file=sys.stderr)
        return 1
    found = await accounts.account_by_name(what)
    if found is None or not await accounts.revoke_account(found[0].user_id, now):
        print(f"chatgate: no active user or token {what!r} (see chatgate user list)", file=sys.stderr)
        return 1
    print(f"Revoked user {what}: their tokens no longer sign in and their browsers are signed out.")
    return 0


def cmd_user(args: argparse.Namespace, config: GatewayConfig, state_dir: Path) -> int:
    def run(accounts: Accounts | OfflineAccounts) -> Any:
        verb = args.user_command
        if verb == "add":
            password = read_password() if args.password else None
            return add(accounts, args.name, args.admin, password, config)
        if verb == "token":
            return token(accounts, args.name, config)
        if verb == "list":
            return listing(accounts)
        return revoke(accounts, args.what)

    try:
        if config.store.url is not None:  # the fleet's accounts are in its PostgreSQL schema
            from chatgate.app.cli.fleet import with_store

            return int(with_store(config, run))
        return int(asyncio.run(run(OfflineAccounts(database_path(config, state_dir)))))
    except (StoreUnavailable, ValueError) as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return 1


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
) -> None:
    users = sub.add_parser("user", help="web chat accounts (platforms.web.auth: accounts)")
    users.set_defaults(func=run)
    users_sub = users.add_subparsers(dest="user_command", required=True)
    add_cmd = users_sub.add_parser("add", help="add a user and print a sign-in token (once)")
    common(add_cmd)
    add_cmd.add_argument("name", help="what the user types at the sign-in page (lower case)")
    add_cmd.add_argument("--admin", action="store_true", help="may list users and revoke in the page")
    add_cmd.add_argument(
        "--password", action="store_true", help="also set a password (asked, or one stdin line)"
    )
    token_cmd = users_sub.add_parser("token", help="print another sign-in token for a user (once)")
    common(token_cmd)
    token_cmd.add_argument("name")
    listing_cmd = users_sub.add_parser("list", help="users, roles, states and active token ids")
    common(listing_cmd)
    revoke_cmd = users_sub.add_parser("revoke", help="revoke a user (NAME) or one sign-in token (TOKEN-ID)")
    common(revoke_cmd)
    revoke_cmd.add_argument("what", help="a user name, or a token id as chatgate user list shows it")
