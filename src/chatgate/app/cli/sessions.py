"""``chatgate sessions``: the conversations a state directory (or a PostgreSQL fleet) holds."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from chatgate.app.config import GatewayConfig
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.sessions import SessionInfo


def cmd_sessions(args: argparse.Namespace, config: GatewayConfig, state_dir: Path) -> int:
    try:
        if config.store.url is not None:
            from chatgate.app.cli.fleet import postgres_sessions

            sessions = postgres_sessions(config, args.limit)
        else:
            found = _sqlite_sessions(config, state_dir, args.limit)
            if found is None:
                return 0
            sessions = found
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


def _sqlite_sessions(config: GatewayConfig, state_dir: Path, limit: int) -> list[SessionInfo] | None:
    """The SQLite file's sessions, read-only; None (and a line saying so) when there is no file."""
    from chatgate.store.sqlite import read_sessions

    path = Path(config.store.sqlite.path) if config.store.sqlite.path else state_dir / "chatgate.db"
    if not path.exists():
        print(f"no sessions yet (no database at {path})")
        return None
    return read_sessions(path, limit)
