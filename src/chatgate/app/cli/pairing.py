"""``chatgate pairing list|approve CODE|revoke USER``: the operator's side of DM pairing.

It runs beside a running gateway: the gateway owns the store, so this writes through a
connection of its own (``store.sqlite.pairing.offline``) and the gateway's authorizer sees
an approval or revocation within a second (``engine.authz``), without a restart. The store
is imported by the commands, not here, so that ``chatgate run`` does not pay for it before
it takes its runtime lock.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from chatgate.app.config import GatewayConfig
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.pairing import PairedUser, PairingApproval, PairingRequest

T = TypeVar("T")


def database_path(config: GatewayConfig, state_dir: Path) -> Path:
    return Path(config.store.sqlite.path) if config.store.sqlite.path else state_dir / "chatgate.db"


def _in(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for row in (header, *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def cmd_list(path: Path) -> int:
    from chatgate.store.sqlite import pairing as sql

    now = time.time()
    pending = sql.offline(path, lambda c: sql.pending_pairings(c, now))
    paired = sql.offline(path, lambda c: sql.paired_users(c, None))
    return print_list(pending, paired, now)


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


def cmd_approve(path: Path, code: str, config: GatewayConfig) -> int:
    from chatgate.store.sqlite import pairing as sql

    limits = config.pairing.limits()
    now = time.time()
    result = sql.offline(path, lambda c: sql.approve_pairing(c, code, now, limits))
    return say_approval(result, code, limits.max_failed_approvals)


def cmd_revoke(path: Path, user: str, platform: str | None) -> int:
    from chatgate.store.sqlite import pairing as sql

    paired = sql.offline(path, lambda c: sql.paired_users(c, platform))
    platforms = sorted({u.platform for u in paired if u.user_id == user})
    if not platforms:
        where = f" on {platform}" if platform else ""
        print(f"chatgate: user {user} is not paired{where} (see `chatgate pairing list`)", file=sys.stderr)
        return 1
    for name in platforms:
        sql.offline(path, lambda c, name=name: sql.revoke_pairing(c, name, user))  # type: ignore[misc]
        print(f"Revoked {name} user {user}: their next message is refused (or offered a new code).")
    return 0


def _guarded(run: Callable[[], int]) -> int:
    try:
        return run()
    except StoreUnavailable as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return 1


def cmd_pairing(args: argparse.Namespace, config: GatewayConfig, state_dir: Path) -> int:
    if config.store.url is not None:
        from chatgate.app.cli.fleet import postgres_pairing

        return _guarded(lambda: postgres_pairing(args, config))
    path = database_path(config, state_dir)
    if not path.exists():
        print(
            f"No database at {path} yet: start the gateway (chatgate run) and let someone write to it;"
            " their code then shows here."
        )
        return 0 if args.pairing_command == "list" else 1
    if args.pairing_command == "approve":
        return _guarded(lambda: cmd_approve(path, args.code, config))
    if args.pairing_command == "revoke":
        return _guarded(lambda: cmd_revoke(path, args.user, args.platform))
    return _guarded(lambda: cmd_list(path))


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
