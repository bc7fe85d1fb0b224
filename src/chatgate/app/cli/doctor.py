"""``chatgate doctor``: one line per check, the fix on each failure, exit 1 when any fails.

Unlike every other command it loads the secrets file itself, as its first check (a file
others can read is a finding here, not a refusal). ``--offline`` leaves out the checks that
talk to the platforms and the model endpoint.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from chatgate.app.cli.common import early_state_dir, resolve_state_dir
from chatgate.app.config import ConfigError, load_config
from chatgate.app.config.envfile import env_file_path
from chatgate.app.doctor import live, local
from chatgate.app.doctor.finding import Finding

AFTER_CONFIG = (
    "secrets",
    "platforms",
    "model",
    "disk space",
    "database",
    "state dir",
    "sandbox",
    "http port",
)


def _print(findings: Iterable[Finding], failed: list[Finding]) -> None:
    for finding in findings:
        print(finding.line(), flush=True)  # as each is found: a live check can take seconds
        if finding.status == "FAIL":
            failed.append(finding)


def run_checks(args: argparse.Namespace) -> list[Finding]:
    """Every check in order; the failures."""
    failed: list[Finding] = []
    secrets_file = env_file_path(early_state_dir(args))
    _print([local.secrets_file(secrets_file, os.environ)], failed)
    path = Path(args.config) if args.config else None
    try:
        config = load_config(path, need_secrets=False)
    except ConfigError as exc:
        fix = "correct that key (docs/configuration.md), then run chatgate doctor again"
        _print([Finding.fail("config", str(exc).replace("\n", " "), fix)], failed)
        _print((Finding.skip(name, "not checked: the config does not load") for name in AFTER_CONFIG), failed)
        return failed
    state_dir = resolve_state_dir(args.state_dir, config)
    _print([Finding.ok("config", f"{path or 'built-in defaults'} loads (agent {config.agent.kind})")], failed)
    _print([local.secrets(config, os.environ, secrets_file)], failed)
    held, running = local.lock(state_dir)
    if args.offline:
        _print([Finding.skip("platforms, model", "not checked (--offline)")], failed)
    else:
        _print(live.platforms(config, os.environ, running is not None), failed)
        _print(live.models(config, os.environ), failed)
    _print([local.disk(state_dir, args.min_free_mb)], failed)
    database = local.postgres_database if config.store.backend == "postgres" else None
    _print([database(config) if database else local.sqlite_database(config, state_dir)], failed)
    _print([held, local.sandbox(config, state_dir), local.port(config, running)], failed)
    return failed


def cmd_doctor(args: argparse.Namespace) -> int:
    failed = run_checks(args)
    if failed:
        print(f"\n{len(failed)} check(s) failed: {', '.join(f.check for f in failed)}", flush=True)
        return 1
    print("\nEvery check passed.", flush=True)
    return 0


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: Callable[[argparse.ArgumentParser], None],
) -> None:
    doctor = sub.add_parser(
        "doctor", help="check the config, secrets, platforms, model, disk, database, sandbox and port"
    )
    common(doctor)
    doctor.add_argument(
        "--offline", action="store_true", help="leave out the live checks of the platforms and the model"
    )
    doctor.add_argument(
        "--min-free-mb",
        type=int,
        default=local.MIN_FREE_MB,
        help=f"fail the disk check below this much free space (default {local.MIN_FREE_MB})",
    )
    doctor.set_defaults(func=cmd_doctor)
