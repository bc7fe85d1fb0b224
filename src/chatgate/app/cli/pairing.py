"""``chatgate pairing list|approve CODE|revoke USER``: the operator's side of DM pairing.

It runs beside a running gateway through a store of its own (``app.store_access``: a side
store on the SQLite file, or the fleet's PostgreSQL schema), and the gateway's authorizer
sees an approval or revocation within a second (``engine.authz``), without a restart.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

from chatgate.app.config import GatewayConfig
from chatgate.app.store_access import NoDatabaseYet, Purpose, open_store
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.pairing import PairedUser, PairingApproval, PairingRequest
from chatgate.domain.store_roles import Pairing


def _in(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for row in (header, *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


async def cmd_list(store: Pairing) -> int:
    now = time.time()
    return print_list(await store.pending_pairings(now), await store.paired_users(None), now)


def print_list(pending: list[PairingRequest], paired: list[PairedUser], now: float) -> int:
    if pending:
        print("Waiting for approval (chatgate pairing approve CODE):")
        _table(
            ("CODE", "PLATFORM", "USER", "NAME", "EXPIRES IN"),
            [(p.code, p.platform, p.user_id, p.user_name or "", _in(p.expires_at - now)) for p in pending],
        )
    else:
        print("No pairing codes are waiting for approval.")
    if paired:
        print("\nPaired users (chatgate pairing revoke USER):")
        when = "%Y-%m-%d %H:%M"
        _table(
            ("PLATFORM", "USER", "NAME", "APPROVED"),
            [
                (u.platform, u.user_id, u.user_name or "", time.strftime(when, time.localtime(u.approved_at)))
                for u in paired
            ],
        )
    return 0


def say_approval(result: PairingApproval, code: str, max_failures: int) -> int:
    if result.outcome == "approved":
        assert result.user is not None
        user = result.user
        name = f" ({user.user_name})" if user.user_name else ""
        print(f"Approved {user.platform} user {user.user_id}{name}: they can talk to the agent now.")
        return 0
    if result.outcome == "locked" or result.locked_until is not None:
        until = time.strftime("%H:%M:%S", time.localtime(result.locked_until or 0))
        print(
            f"chatgate: pairing approvals are locked until {until} after {max_failures} wrong codes"
            " in a row; check the code with `chatgate pairing list` and try again then",
            file=sys.stderr,
        )
        return 1
    left = max(0, max_failures - result.failures)
    why = (
        "has expired; ask them to write again for a new one"
        if result.outcome == "expired"
        else "is not waiting"
    )
    print(
        f"chatgate: code {code} {why}. `chatgate pairing list` shows the waiting codes"
        f" ({left} more wrong code(s) lock approvals for a while)",
        file=sys.stderr,
    )
    return 1


async def cmd_approve(store: Pairing, code: str, config: GatewayConfig) -> int:
    limits = config.pairing.limits()
    result = await store.approve_pairing(code, time.time(), limits)
    return say_approval(result, code, limits.max_failed_approvals)


async def cmd_revoke(store: Pairing, user: str, platform: str | None) -> int:
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


def cmd_pairing(args: argparse.Namespace, config: GatewayConfig, state_dir: Path) -> int:
    async def run() -> int:
        purpose: Purpose = "read" if args.pairing_command == "list" else "change"
        async with open_store(config, state_dir, purpose=purpose) as store:
            if args.pairing_command == "approve":
                return await cmd_approve(store, args.code, config)
            if args.pairing_command == "revoke":
                return await cmd_revoke(store, args.user, args.platform)
            return await cmd_list(store)

    try:
        return asyncio.run(run())
    except NoDatabaseYet as exc:
        print(
            f"No database at {exc.path} yet: start the gateway (chatgate run) and let someone write to it;"
            " their code then shows here."
        )
        return 0 if args.pairing_command == "list" else 1
    except StoreUnavailable as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return 1


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
) -> None:
    pairing = sub.add_parser("pairing", help="approve who may talk: codes strangers got in a DM")
    pairing.set_defaults(func=run)
    pairing_sub = pairing.add_subparsers(dest="pairing_command", required=True)
    listing = pairing_sub.add_parser("list", help="codes waiting for approval, and paired users")
    common(listing)
    approve = pairing_sub.add_parser("approve", help="let the user who got CODE talk to the agent")
    common(approve)
    approve.add_argument("code", help="the 8-character code the user was sent (case and dashes ignored)")
    revoke = pairing_sub.add_parser("revoke", help="forget a paired user")
    common(revoke)
    revoke.add_argument("user", help="the user id, as `chatgate pairing list` shows it")
    revoke.add_argument(
        "--platform", help="only on this platform (default: every platform they are paired on)"
    )
