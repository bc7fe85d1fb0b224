"""The ``chatgate`` command line."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import os
import shlex
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from chatgate import __version__
from chatgate.app import registry
from chatgate.app.cli import collector
from chatgate.app.cli.common import (
    EX_CONFIG,
    EX_FORCED,
    EX_USAGE,
    admin_config,
    default_state_dir,
    described,
    load_from_args,
    load_secrets_file,
    resolve_state_dir,
)
from chatgate.app.config import ConfigError, GatewayConfig
from chatgate.app.config.secrets import check_secrets
from chatgate.app.locks import FileLock, LockHeld, LockRecord, LockUnavailable
from chatgate.app.logs import setup_logging
from chatgate.app.runtime_lock import acquire_runtime_lock
from chatgate.domain.errors import StoreUnavailable

log = logging.getLogger("chatgate")
NO_SECRETS_FILE = frozenset({"version", "relay-sim", "doctor"})
"""Commands that do not load ``<state dir>/chatgate.env`` first (``doctor`` checks it itself)."""


async def _run(config: GatewayConfig, state_dir: Path, lock: FileLock) -> int:
    from chatgate.app.gateway import Gateway  # the engine and the store: only for `run`

    gateway = Gateway(config, state_dir)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if _STOP_REQUESTED.is_set():  # a SIGTERM while the parts were built: nothing has started
        log.info("stopped before it finished starting; nothing had started")
        return 0
    try:
        await gateway.start()
    except BaseException:
        await gateway.stop()
        raise
    lock.update(
        LockRecord.for_this_process(http=f"{config.http.host}:{gateway.port}", state_dir=str(state_dir))
    )
    host = config.http.host
    shown = f"[{host}]" if ":" in host else host  # an IPv6 literal needs brackets in a URL
    if gateway.serves_page:
        print(f"chatgate {__version__} is running: open http://{shown}:{gateway.port}/", flush=True)
    else:  # no page at / (the web chat is off): say where it listens, not "open" a 404
        print(
            f"chatgate {__version__} is running: http://{shown}:{gateway.port}/ answers the API,"
            " webhooks and health checks (no chat page: the web chat is off)",
            flush=True,
        )
    print(f"state: {state_dir}  (stop with Ctrl+C)", flush=True)
    started = loop.call_later(collector.AFTER_START_SECONDS, collector.release)
    await stop.wait()
    started.cancel()
    log.info("shutting down")
    deadline = config.shutdown.hard_deadline_seconds
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(sig)
        # A second signal forces exit at once: everything committed is safe in the store.
        loop.add_signal_handler(sig, functools.partial(_force_exit, "second signal"))
    watchdog = threading.Timer(deadline, _force_exit, args=(f"shutdown exceeded {deadline:.0f}s",))
    watchdog.daemon = True
    watchdog.start()
    try:
        await gateway.stop()
    finally:
        watchdog.cancel()
    return 0


def _force_exit(reason: str) -> None:
    sys.stderr.write(f"chatgate: forcing exit ({reason}); unfinished work resumes at the next start\n")
    sys.stderr.flush()
    os._exit(EX_FORCED)


def _database_path(config: GatewayConfig, state_dir: Path) -> Path:
    from chatgate.app.store_access import database_path  # the store's modules: only when asked

    return database_path(config, state_dir)


def _reset_damaged_state(db_path: Path) -> None:
    """``run --reset-state``: accept the loss of a missing or damaged database (a healthy one is kept)."""
    from chatgate.app.store_access import set_aside  # only for --reset-state

    moved = set_aside(db_path)
    if moved:
        log.warning(
            "--reset-state: starting with an empty database; the remains were set aside: %s",
            ", ".join(str(p) for p in moved),
        )
    else:
        log.info("--reset-state: %s is not missing or damaged; nothing was reset", db_path)


def cmd_run(args: argparse.Namespace) -> int:
    # `run` alone imports the gateway's parts, and only once it runs
    from chatgate.app.doctor.local import start_problems
    from chatgate.app.startup import AddressInUse, CredentialInUse, StartupError
    from chatgate.app.store_access import StateDamaged

    config = load_from_args(args)
    if args.port is not None:
        config.http.port = args.port
    if args.host is not None:
        config.http.host = args.host
        check_secrets(config, os.environ)  # a non-loopback address needs an access token here too
    setup_logging(args.log_level or config.log_level, args.log_format)
    state_dir = resolve_state_dir(args.state_dir, config)
    state_dir.mkdir(parents=True, exist_ok=True)
    for problem in start_problems(config, state_dir):  # the cheap checks of `chatgate doctor`
        log.warning("%s (chatgate doctor runs every check)", problem.line())
    try:
        lock = acquire_runtime_lock(state_dir, args.replace, args.replace_timeout)
    except LockHeld as held:
        who = f"pid {held.record.pid}" if held.record else "another process"
        print(
            f"chatgate: a gateway is already running for {state_dir} ({who}).\n"
            "  Stop it with `chatgate stop`, or start with `chatgate run --replace` to take over.",
            file=sys.stderr,
        )
        return EX_CONFIG
    except LockUnavailable as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return EX_CONFIG
    # Until the loop takes SIGTERM over (in _run), a stop is noted and acted on there (exit 0). A
    # flag, not an exception raised wherever the main thread is: library code wrapped or swallowed it.
    signal.signal(signal.SIGTERM, _note_stop)
    try:
        if args.reset_state and config.store.url is not None:
            log.info("--reset-state: the store is PostgreSQL, not a file in the state dir; nothing was reset")
        elif args.reset_state:
            _reset_damaged_state(_database_path(config, state_dir))
        return asyncio.run(_run(config, state_dir, lock))
    except (AddressInUse, CredentialInUse, StateDamaged) as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return EX_CONFIG  # like the runtime lock: a restart will not fix it
    except (StartupError, StoreUnavailable) as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return 1
    finally:
        lock.release()


_STOP_REQUESTED = threading.Event()
"""SIGTERM arrived while the gateway was still being built."""


def _note_stop(signum: int, frame: object) -> None:
    _STOP_REQUESTED.set()


def cmd_sessions(args: argparse.Namespace) -> int:
    from chatgate.app.cli import sessions as sessions_cli  # each command's module: when it runs

    config = admin_config(args)
    return sessions_cli.cmd_sessions(args, config, resolve_state_dir(args.state_dir, config))


def _status(args: argparse.Namespace, state_dir: Path) -> int:
    # each command's module: when it runs
    from chatgate.app.cli import ops as ops_cli
    from chatgate.app.store_access import NoDatabaseYet, open_store

    config = admin_config(args)

    async def members() -> list[dict[str, object]] | None:
        async with open_store(config, state_dir, purpose="read") as store:
            return await store.fleet_members()  # None: a store of one gateway has no fleet

    try:
        fleet = asyncio.run(members())
    except NoDatabaseYet:
        fleet = None
    except StoreUnavailable as exc:
        print(f"chatgate: cannot list the fleet: {exc}", file=sys.stderr)
        fleet = None
    return ops_cli.cmd_status(args, state_dir, fleet)


def cmd_version(args: argparse.Namespace) -> int:
    print(f"chatgate {__version__}")
    return 0


def cmd_relay_sim_moved(args: argparse.Namespace) -> int:
    """``chatgate relay-sim`` (from older docs): say which command to run instead."""
    again = shlex.join(["chatgate-relay-sim", *args.relay_sim_args])
    print(
        f"chatgate: relay-sim is its own command now (pip install -e tools/relaysim); run: {again}",
        file=sys.stderr,
    )
    return EX_USAGE


def _with_state(
    command: Callable[[argparse.Namespace, Path], int],
) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        return command(args, resolve_state_dir(args.state_dir, admin_config(args)))

    return run


def cmd_pairing(args: argparse.Namespace) -> int:
    from chatgate.app.cli import pairing as pairing_cli  # each command's module: when it runs

    config = admin_config(args)
    return pairing_cli.cmd_pairing(args, config, resolve_state_dir(args.state_dir, config))


def cmd_schedules(args: argparse.Namespace) -> int:
    from chatgate.app.cli import schedules as schedules_cli  # each command's module: when it runs

    config = admin_config(args)
    return schedules_cli.cmd_schedules(args, config, resolve_state_dir(args.state_dir, config))


GUIDE = """\
chatgate {version}: a durable chat gateway for AI agents.

  chatgate init                guided setup: agent, platforms, who may talk; writes chatgate.yaml
  chatgate run                 start on the defaults: SQLite, the web chat, the offline echo agent
  chatgate run --config FILE   start with your config (docs/configuration.md)
  chatgate config check FILE   validate a config without starting
  chatgate doctor              check everything: config, secrets, platforms, model, disk, database, port
  chatgate status | stop       the gateway running for this state dir
  chatgate service install     run it as a systemd user service (--config FILE)
  chatgate sessions            list conversations
  chatgate pairing list        codes strangers got in a DM; approve one with: chatgate pairing approve CODE
{platform_lines}  chatgate schedules list      schedules and their next firing (pause|resume|delete ID)
  chatgate --help              every command; chatgate COMMAND --help for its options

State lives in {state_dir} unless --state-dir or state_dir says otherwise.
"""


def _log_level(value: str) -> str:
    level = value.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise argparse.ArgumentTypeError(f"{value!r} is not one of debug, info, warning, error")
    return level


def _add_run_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: Callable[[argparse.ArgumentParser], None],
) -> None:
    run = sub.add_parser("run", help="run the gateway")
    common(run)
    run.add_argument("--port", type=int, help="HTTP port for the web chat, health and metrics")
    run.add_argument("--host", help="address to listen on (default 127.0.0.1; others need an access token)")
    run.add_argument(
        "--log-level", type=_log_level, help="debug, info, warning or error (default: log_level)"
    )
    run.add_argument(
        "--replace", action="store_true", help="stop the gateway running on this state dir, then start"
    )
    run.add_argument("--replace-timeout", type=float, default=60.0, help="seconds to wait before killing it")
    run.add_argument(
        "--reset-state",
        action="store_true",
        help="if the database this state dir had is missing or damaged, set its remains aside and"
        " start empty (a healthy database is never touched)",
    )
    run.add_argument(
        "--log-format", choices=("text", "json"), default="text", help="json: one object per line"
    )
    run.set_defaults(func=cmd_run)


def build_parser(*, run_only: bool = False) -> argparse.ArgumentParser:
    """Every command's parser; ``run_only``: just ``run``'s, whose start need not import the others."""
    parser = argparse.ArgumentParser(prog="chatgate", description="A durable chat gateway for AI agents.")
    parser.add_argument("--version", action="version", version=f"chatgate {__version__}")
    sub = parser.add_subparsers(dest="command")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", help="YAML config file (default: built-in defaults)")
        p.add_argument("--state-dir", help="where the database lives (env CHATGATE_STATE_DIR)")

    if run_only:
        _add_run_parser(sub, common)
        return described(parser)
    from chatgate.app.cli import init as init_wizard  # the other commands: not for `run`

    init_wizard.add_parser(sub, init_wizard.cmd_init)
    _add_run_parser(sub, common)
    _add_tool_parsers(sub, common)
    return described(parser)


def _add_tool_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: Callable[[argparse.ArgumentParser], None],
) -> None:
    """The commands besides ``init`` and ``run``, and each platform's own (through its plugin)."""
    # the other commands' modules: not for `run`
    from chatgate.app.cli import doctor as doctor_cli
    from chatgate.app.cli import ops as ops_cli
    from chatgate.app.cli import pairing as pairing_cli
    from chatgate.app.cli import schedules as schedules_cli
    from chatgate.app.cli import service
    from chatgate.app.cli import store as store_cli
    from chatgate.app.cli.platform_commands import add_platform_commands

    sessions = sub.add_parser("sessions", help="list sessions with their last activity")
    common(sessions)
    sessions.add_argument("--limit", type=int, default=100, help="how many, most recent first")
    sessions.set_defaults(func=cmd_sessions)
    status = sub.add_parser("status", help="is a gateway running for this state dir, and how is it doing")
    common(status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(func=_with_state(_status))
    stop = sub.add_parser("stop", help="stop the gateway running for this state dir")
    common(stop)
    stop.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a clean stop")
    stop.add_argument("--force", action="store_true", help="kill it if it does not stop in time")
    stop.set_defaults(func=_with_state(ops_cli.cmd_stop))
    config = sub.add_parser("config", help="configuration tools")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    check = config_sub.add_parser("check", help="validate a config file without starting")
    check.add_argument("file", nargs="?", help="the YAML file (default: --config, else the defaults)")
    check.add_argument("--config", help=argparse.SUPPRESS)
    check.add_argument(
        "--strict", action="store_true", help="a secret that is not set is an error (exit 78), as for run"
    )
    check.set_defaults(func=ops_cli.cmd_config_check)
    doctor_cli.add_parser(sub, common)
    pairing_cli.add_parser(sub, common, cmd_pairing)
    add_platform_commands(sub, common)
    schedules_cli.add_parser(sub, common, cmd_schedules)
    store_cli.add_parser(sub, common, _with_state, load_from_args, _database_path)
    service.add_parser(sub, common, _with_state)
    relay_sim = sub.add_parser(
        "relay-sim", add_help=False, help="moved: the relay connector simulator is `chatgate-relay-sim`"
    )
    relay_sim.set_defaults(func=cmd_relay_sim_moved)
    version = sub.add_parser("version", help="print the version")
    version.set_defaults(func=cmd_version)


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    # `chatgate run ...` (what a service manager runs at every restart) builds only its own parser.
    parser = build_parser(run_only=words[:1] == ["run"])
    # parse_args, except that `relay-sim` keeps whatever options it was given, for its hint.
    args, extra = parser.parse_known_args(argv)
    if args.command is None:
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        lines = "".join(f"  {line}\n" for name in registry.names() for line in registry.plugin(name).guide)
        state_dir = default_state_dir()
        print(GUIDE.format(version=__version__, state_dir=state_dir, platform_lines=lines), end="")
        return 0
    if args.command != "run":  # only a gateway's start is worth the collector's rest
        collector.release()
    if args.command == "relay-sim":
        args.relay_sim_args = extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if args.command not in NO_SECRETS_FILE:
            load_secrets_file(args)  # every command sees the secrets `init` saved
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
