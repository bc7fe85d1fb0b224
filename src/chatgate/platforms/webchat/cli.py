"""``chatgate user add|token|list|revoke``: the web chat's accounts (``platforms.web.auth: accounts``).

Like ``chatgate api-key`` it runs beside a running gateway through a store of its own
(``CommandTools.open_store``). The gateway reads sessions from the store on every request and
re-checks its open sockets every few seconds, so a revocation here signs the user out
everywhere. Only hashes are stored; ``add`` and ``token`` print the sign-in token, once.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
import time

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
from chatgate.domain.errors import NoDatabaseYet, StoreUnavailable
from chatgate.domain.store_roles import Accounts
from chatgate.platforms.kit.plugin import CommandTools, Purpose
from chatgate.platforms.webchat.section import WebChatSection

_NO_USERS = "No users yet; add one with: chatgate user add NAME [--admin] [--password]"


def _no_user(name: str) -> str:
    return f"chatgate: no active user {name} (see chatgate user list)"


def _no_user_or_token(what: str) -> str:
    return f"chatgate: no active user or token {what!r} (see chatgate user list)"


def read_password() -> str:
    """Asked twice on a terminal; one line of standard input otherwise (scripts, tests)."""
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("Password: ")
    if first != getpass.getpass("Again: "):
        raise ValueError("the two passwords differ")
    return first


async def add(
    accounts: Accounts, name: str, admin: bool, password: str | None, section: WebChatSection
) -> int:
    if (problem := name_problem(name)) is not None:
        print(f"chatgate: {problem}", file=sys.stderr)
        return 2
    hashed = await asyncio.to_thread(hash_password, password) if password else None
    account = Account(new_id(), name, "admin" if admin else "user", time.time())
    if not await accounts.create_account(account, hashed):
        print(f"chatgate: there is already a user {name} (see chatgate user list)", file=sys.stderr)
        return 1
    print(f"Added {account.role} {name}" + (" with a password." if hashed else "."))
    return await _issue(accounts, account, section)


async def token(accounts: Accounts, name: str, section: WebChatSection) -> int:
    found = await accounts.account_by_name(name)
    if found is None or not found[0].active:
        print(_no_user(name), file=sys.stderr)
        return 1
    return await _issue(accounts, found[0], section)


async def _issue(accounts: Accounts, account: Account, section: WebChatSection) -> int:
    token_id, value = new_sign_in_token()
    await accounts.add_sign_in_token(SignInToken(token_id, account.user_id, time.time()), hash_secret(value))
    print(
        f"Sign-in token {token_id} for {account.name}. This is the only time it is shown; keep it secret:\n"
    )
    print(f"  {value}\n")
    if section.auth_mode() != "accounts":
        print("This config does not use accounts: set platforms.web.auth: accounts (docs/webchat.md).")
    return 0


def _when(at: float | None) -> str:
    return "-" if at is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(at))


async def listing(accounts: Accounts) -> int:
    users: list[Account] = await accounts.list_accounts()
    if not users:
        print(_NO_USERS)
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


async def revoke(accounts: Accounts, what: str) -> int:
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
        print(_no_user_or_token(what), file=sys.stderr)
        return 1
    print(f"Revoked user {what}: their tokens no longer sign in and their browsers are signed out.")
    return 0


def cmd_user(args: argparse.Namespace, tools: CommandTools) -> int:
    verb = args.user_command
    purpose: Purpose = "create" if verb == "add" else "change"
    section = tools.section(args)
    assert isinstance(section, WebChatSection)

    async def run(password: str | None) -> int:
        async with tools.open_store(args, purpose) as accounts:
            if verb == "add":
                return await add(accounts, args.name, args.admin, password, section)
            if verb == "token":
                return await token(accounts, args.name, section)
            if verb == "list":
                return await listing(accounts)
            return await revoke(accounts, args.what)

    try:
        return asyncio.run(run(read_password() if verb == "add" and args.password else None))
    except NoDatabaseYet:  # no gateway has run here: no users yet
        return _nobody(verb, args)
    except (StoreUnavailable, ValueError) as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return 1


def _nobody(verb: str, args: argparse.Namespace) -> int:
    """What ``token``, ``list`` and ``revoke`` say with no database: as with no users in one."""
    if verb == "list":
        print(_NO_USERS)
        return 0
    print(_no_user(args.name) if verb == "token" else _no_user_or_token(args.what), file=sys.stderr)
    return 1


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], tools: CommandTools) -> None:
    users = sub.add_parser(
        "user", help="web chat accounts (platforms.web.auth: accounts)", description=__doc__.splitlines()[0]
    )
    users.set_defaults(func=lambda args: cmd_user(args, tools))
    common = tools.common
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
