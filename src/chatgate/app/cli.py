"""The ``chatgate`` command line."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from pathlib import Path

import platformdirs

from chatgate import __version__
from chatgate.app.config import ConfigError, GatewayConfig, load_config
from chatgate.app.logs import setup_logging

EX_CONFIG = 78
log = logging.getLogger("chatgate")


def resolve_state_dir(cli_value: str | None, config: GatewayConfig) -> Path:
    """--state-dir, then CHATGATE_STATE_DIR / state_dir in the config, then the platform default."""
    chosen = cli_value or config.state_dir or platformdirs.user_state_dir("chatgate")
    return Path(chosen).expanduser().resolve()


def _load(args: argparse.Namespace) -> GatewayConfig:
    return load_config(Path(args.config) if args.config else None)


async def _run(config: GatewayConfig, state_dir: Path) -> int:
    from chatgate.app.gateway import Gateway

    gateway = Gateway(config, state_dir)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await gateway.start()
    except BaseException:
        await gateway.stop()
        raise
    print(f"chatgate {__version__} is running: open http://{config.http.host}:{gateway.port}/", flush=True)
    print(f"state: {state_dir}  (stop with Ctrl+C)", flush=True)
    await stop.wait()
    log.info("shutting down")
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(sig)
        # A second signal during shutdown exits at once; nothing committed is lost.
        loop.add_signal_handler(sig, lambda: os._exit(130))
    await gateway.stop()
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from chatgate.app.gateway import StartupError

    config = _load(args)
    if args.port is not None:
        config.http.port = args.port
    setup_logging(config.log_level)
    state_dir = resolve_state_dir(args.state_dir, config)
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        return asyncio.run(_run(config, state_dir))
    except StartupError as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return 1


def cmd_sessions(args: argparse.Namespace) -> int:
    from chatgate.store.sqlite import SqliteStore

    config = _load(args)
    state_dir = resolve_state_dir(args.state_dir, config)
    path = Path(config.store.sqlite.path) if config.store.sqlite.path else state_dir / "chatgate.db"
    if not path.exists():
        print(f"no sessions yet (no database at {path})")
        return 0

    async def listing() -> int:
        store = SqliteStore(path)
        await store.open()
        try:
            sessions = await store.list_sessions(args.limit)
        finally:
            await store.close()
        if not sessions:
            print("no sessions yet")
            return 0
        print(f"{'SESSION KEY':<48} {'LAST ACTIVITY':<20} {'QUEUED':>6}  STATE")
        for s in sessions:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.last_activity))
            state = "running" if s.leased_by else ("error: " + s.last_error if s.last_error else "idle")
            print(f"{s.session_key:<48} {when:<20} {s.queued:>6}  {state}")
        return 0

    return asyncio.run(listing())


def cmd_version(args: argparse.Namespace) -> int:
    print(f"chatgate {__version__}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chatgate", description="A durable chat gateway for AI agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", help="YAML config file (default: built-in defaults)")
        p.add_argument("--state-dir", help="where the database lives (env CHATGATE_STATE_DIR)")

    run = sub.add_parser("run", help="run the gateway")
    common(run)
    run.add_argument("--port", type=int, help="HTTP port for the web chat, health and metrics")
    run.set_defaults(func=cmd_run)
    sessions = sub.add_parser("sessions", help="list sessions with their last activity")
    common(sessions)
    sessions.add_argument("--limit", type=int, default=100)
    sessions.set_defaults(func=cmd_sessions)
    version = sub.add_parser("version", help="print the version")
    version.set_defaults(func=cmd_version)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except ConfigError as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return EX_CONFIG
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
