"""``chatgate sessions``: the conversations the configured store holds (a state directory's
SQLite file, or a PostgreSQL fleet's schema), read beside a running gateway."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from chatgate.app.config import GatewayConfig
from chatgate.app.store_access import NoDatabaseYet, open_store
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.sessions import SessionInfo


async def _sessions(config: GatewayConfig, state_dir: Path, limit: int) -> list[SessionInfo]:
    async with open_store(config, state_dir, purpose="read") as store:
        return await store.list_sessions(limit)


def cmd_sessions(args: argparse.Namespace, config: GatewayConfig, state_dir: Path) -> int:
    try:
        sessions = asyncio.run(_sessions(config, state_dir, args.limit))
    except NoDatabaseYet as exc:
        print(f"no sessions yet (no database at {exc.path})")
        return 0
    except StoreUnavailable as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return 1
    if not sessions:
        print("no sessions yet")
        return 0
    width = max(len("SESSION KEY"), *(len(s.session_key) for s in sessions))
    print(f"{'SESSION KEY':<{width}}  {'LAST ACTIVITY':<19}  {'QUEUED':>6}  STATE")
    for s in sessions:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.last_activity))
        state = "running" if s.leased_by else ("error: " + s.last_error if s.last_error else "idle")
        print(f"{s.session_key:<{width}}  {when:<19}  {s.queued:>6}  {state}")
    return 0
