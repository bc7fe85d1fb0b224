"""What every subcommand shares: exit codes, the state directory, the config from ``--config``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from chatgate.app.config import ConfigError, GatewayConfig, load_config
from chatgate.app.config.envfile import env_file_path, load_env_file

EX_USAGE = 2
EX_CONFIG = 78
"""A mistake a restart will not fix (config, lock held): systemd's EX_CONFIG."""
EX_FORCED = 70


def default_state_dir() -> str:
    import platformdirs  # only when no state directory is given: about 0.2 MB a gateway keeps

    return platformdirs.user_state_dir("chatgate")


def resolve_state_dir(cli_value: str | None, config: GatewayConfig) -> Path:
    """--state-dir, then CHATGATE_STATE_DIR / state_dir in the config, then the platform default."""
    chosen = cli_value or config.state_dir or default_state_dir()
    return Path(chosen).expanduser().resolve()


def load_from_args(args: argparse.Namespace, *, need_secrets: bool = True) -> GatewayConfig:
    """The config ``--config`` names; ``need_secrets=False`` for commands that read the state,
    not the platforms (they work in a terminal where the gateway's secrets are not set)."""
    return load_config(Path(args.config) if args.config else None, need_secrets=need_secrets)


def admin_config(args: argparse.Namespace) -> GatewayConfig:
    return load_from_args(args, need_secrets=False)


def _config_path(args: argparse.Namespace) -> Path | None:
    """The config file the arguments name (``init`` names the one it writes)."""
    named = getattr(args, "config", None) or getattr(args, "file", None)
    if named:
        return Path(named)
    written = getattr(args, "write", None)
    return Path(written) if written and Path(written).expanduser().exists() else None


def early_state_dir(args: argparse.Namespace) -> Path:
    """The state directory before the secrets are loaded: the config is read without them, and
    a config that does not load yet falls back to ``CHATGATE_STATE_DIR`` or the default (its own
    error is reported by the command itself)."""
    if getattr(args, "state_dir", None):
        return Path(args.state_dir).expanduser().resolve()
    path = _config_path(args)
    try:
        config = load_config(path.expanduser() if path else None, check_installed=False, need_secrets=False)
    except ConfigError:
        chosen = os.environ.get("CHATGATE_STATE_DIR") or default_state_dir()
        return Path(chosen).expanduser().resolve()
    return resolve_state_dir(None, config)


def load_secrets_file(args: argparse.Namespace) -> Path:
    """Load ``<state dir>/chatgate.env`` into this process's environment (a variable already set
    wins); ``ConfigError`` for a file others can read. Returns the file's path."""
    path = env_file_path(early_state_dir(args))
    load_env_file(path, os.environ)
    return path


def described(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Each subcommand's ``--help`` opens with the line ``chatgate --help`` lists it by."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, child in action.choices.items():
                line = helps.get(name, "")
                if child.description is None and line:
                    child.description = f"{line[:1].upper()}{line[1:]}."
                described(child)
    return parser
