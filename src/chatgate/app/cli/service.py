"""``chatgate service install|uninstall|status``: run the gateway as a systemd user service.

The unit runs ``chatgate run`` with the config and state dir made absolute and loads the
secrets file (``<state dir>/chatgate.env``). It restarts on every failure, exit 78 (a
configuration mistake, a secret not there yet) included, with a delay that grows (systemd
254 and later: ``RestartSteps``; before, a fixed 30 s) and no start limit: a service
installed right after ``init`` and before its secrets comes up once they are there. It gives
the gateway longer to stop than its own shutdown deadline (so systemd never SIGKILLs a
drain that is still within budget), and raises the open-file limit for many chats. Where
there is no user systemd (a container, macOS, no login session) the unit is written and printed with
the commands to use it; nothing is enabled.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from chatgate.app.config import load_config
from chatgate.app.config.envfile import env_file_path
from chatgate.app.config.secrets import missing_secrets

UNIT_NAME = "chatgate.service"
LIMIT_NOFILE = 65536


def unit_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user" / UNIT_NAME


def _command() -> list[str]:
    """How to start this chatgate: its console script next to this Python, else ``python -m``."""
    script = Path(sys.executable).with_name("chatgate")
    return [str(script)] if script.exists() else [sys.executable, "-m", "chatgate"]


RESTART_FIRST_SECONDS = 5
RESTART_MAX_SECONDS = 300
RESTART_STEPS = 6
"""5 s, then longer at each failure in a row, up to 5 min (systemd's RestartSteps=)."""
RESTART_FIXED_SECONDS = 30
"""Where systemd has no RestartSteps (before 254): one delay, gentle on a crash loop."""
STEPS_SINCE = 254


def systemd_version() -> int | None:
    """This machine's systemd (``systemctl --version``), or None where there is none."""
    try:
        done = subprocess.run(["systemctl", "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    words = done.stdout.split()
    return int(words[1]) if len(words) > 1 and words[0] == "systemd" and words[1].isdigit() else None


def restart_lines(version: int | None) -> list[str]:
    """Restart on every failure with a growing delay; the keys this systemd knows."""
    lines = [
        "# Restarts on every failure, a config mistake (exit 78) or a missing secret included:",
        "# fix it (chatgate doctor says what) and the next attempt starts.",
        "Restart=on-failure",
    ]
    if version is not None and version >= STEPS_SINCE:
        return [
            *lines,
            f"RestartSec={RESTART_FIRST_SECONDS}",
            f"RestartSteps={RESTART_STEPS}",
            f"RestartMaxDelaySec={RESTART_MAX_SECONDS}",
        ]
    return [*lines, f"RestartSec={RESTART_FIXED_SECONDS}"]


def unit_text(
    config_path: Path | None, state_dir: Path, stop_seconds: float, systemd: int | None = None
) -> str:
    run = [*_command(), "run", "--state-dir", str(state_dir)]
    if config_path is not None:
        run += ["--config", str(config_path)]
    workdir = config_path.parent if config_path is not None else state_dir
    return "\n".join(
        [
            "# Written by `chatgate service install`; rewrite it with the same command.",
            "[Unit]",
            "Description=chatgate: a durable chat gateway for AI agents",
            "After=network-online.target",
            "Wants=network-online.target",
            "# No start limit: the growing restart delay is the backoff, and it never gives up.",
            "StartLimitIntervalSec=0",
            "",
            "[Service]",
            "Type=exec",
            f"ExecStart={shlex.join(run)}",
            f"WorkingDirectory={workdir}",
            f"Environment=CHATGATE_STATE_DIR={state_dir}",
            "# Secrets (bot tokens, API keys) go in this file as NAME=value lines, never in the config.",
            f"EnvironmentFile=-{state_dir / 'chatgate.env'}",
            *restart_lines(systemd),
            "KillSignal=SIGTERM",
            "# Longer than shutdown.hard_deadline_seconds, so a drain within budget is never killed.",
            f"TimeoutStopSec={math.ceil(stop_seconds)}",
            f"LimitNOFILE={LIMIT_NOFILE}",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )


Systemctl = Callable[..., "subprocess.CompletedProcess[str]"]


def systemctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True, timeout=30)


def user_systemd_available(run: Systemctl = systemctl) -> bool:
    """A reachable user manager: ``systemctl`` exists and ``--user`` can talk to it."""
    if shutil.which("systemctl") is None:
        return False
    try:
        return run("show-environment").returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _unit_for(args: argparse.Namespace, state_dir: Path) -> tuple[str, list[str]]:
    """The unit's text, and the secrets the config names that are not set yet (the service
    retries until they are in the secrets file)."""
    config_path = Path(args.config).expanduser().resolve() if args.config else None
    # a broken config is reported now, not by a restart loop; a secret may come later
    config = load_config(config_path, need_secrets=False)
    missing = [need.env or need.key for need in missing_secrets(config, os.environ)]
    text = unit_text(config_path, state_dir, config.shutdown.hard_deadline_seconds + 10, systemd_version())
    return text, missing


def cmd_install(args: argparse.Namespace, state_dir: Path) -> int:
    text, missing = _unit_for(args, state_dir)
    path = unit_path()
    if args.print_only:
        print(text, end="")
        return 0
    secrets = env_file_path(state_dir)
    print(f"Secrets (bot tokens, API keys) go in {secrets} as NAME=value lines (chmod 600).")
    if missing:
        print(
            f"  Not set yet: {', '.join(missing)}. Until they are in that file the service exits and"
            " retries with a growing delay; `chatgate doctor` checks everything."
        )
    state_dir.mkdir(parents=True, exist_ok=True)  # systemd refuses a missing WorkingDirectory
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"Wrote {path}.")
    if not user_systemd_available():
        print(text)
        print("No user systemd answers here (systemctl --user), so nothing was enabled. Where it does, run:")
        print("  systemctl --user daemon-reload && systemctl --user enable --now chatgate")
        return 0
    for step in (("daemon-reload",), ("enable", "--now", UNIT_NAME)):
        done = systemctl(*step)
        if done.returncode != 0:
            print(
                f"chatgate: systemctl --user {' '.join(step)} failed: {done.stderr.strip()}", file=sys.stderr
            )
            return 1
    print("Enabled and started it.")
    print("  logs: journalctl --user -u chatgate -f    stop: systemctl --user stop chatgate")
    print("  to keep it running after you log out: loginctl enable-linger")
    return 0


def cmd_uninstall(args: argparse.Namespace, state_dir: Path) -> int:
    path = unit_path()
    if user_systemd_available():
        systemctl("disable", "--now", UNIT_NAME)
    if not path.exists():
        print(f"No unit at {path}; nothing to remove.")
        return 0
    path.unlink()
    if user_systemd_available():
        systemctl("daemon-reload")
    print(f"Removed {path}.")
    return 0


def cmd_status(args: argparse.Namespace, state_dir: Path) -> int:
    path = unit_path()
    if not path.exists():
        print(f"Not installed (no unit at {path}); install it with `chatgate service install --config FILE`.")
        return 3
    print(f"Unit: {path}")
    if not user_systemd_available():
        print("No user systemd here: the unit is written but not managed.")
        return 3
    done = systemctl("is-active", UNIT_NAME)
    state = done.stdout.strip() or "unknown"
    print(f"State: {state}  (details: systemctl --user status chatgate)")
    return 0 if state == "active" else 3


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: Callable[[argparse.ArgumentParser], None],
    with_state: Callable[[Callable[[argparse.Namespace, Path], int]], Callable[[argparse.Namespace], int]],
) -> None:
    service = sub.add_parser("service", help="run chatgate as a systemd user service")
    service_sub = service.add_subparsers(dest="service_command", required=True)
    install = service_sub.add_parser("install", help="write, enable and start the user unit")
    common(install)
    install.add_argument(
        "--print", dest="print_only", action="store_true", help="only print the unit, change nothing"
    )
    install.set_defaults(func=with_state(cmd_install))
    uninstall = service_sub.add_parser("uninstall", help="stop, disable and remove the user unit")
    common(uninstall)
    uninstall.set_defaults(func=with_state(cmd_uninstall))
    status = service_sub.add_parser("status", help="is the unit installed, and is it running")
    common(status)
    status.set_defaults(func=with_state(cmd_status))
