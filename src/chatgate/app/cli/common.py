"""What every subcommand shares: exit codes, the state directory, the config from ``--config``."""

from __future__ import annotations

import argparse
from pathlib import Path

import platformdirs

from chatgate.app.config import GatewayConfig, load_config

EX_USAGE = 2
EX_CONFIG = 78
"""A mistake a restart will not fix (config, lock held): systemd's EX_CONFIG."""
EX_FORCED = 70


def resolve_state_dir(cli_value: str | None, config: GatewayConfig) -> Path:
    """--state-dir, then CHATGATE_STATE_DIR / state_dir in the config, then the platform default."""
    chosen = cli_value or config.state_dir or platformdirs.user_state_dir("chatgate")
    return Path(chosen).expanduser().resolve()


def load_from_args(args: argparse.Namespace, *, need_secrets: bool = True) -> GatewayConfig:
    """The config ``--config`` names; ``need_secrets=False`` for commands that read the state,
    not the platforms (they work in a terminal where the gateway's secrets are not set)."""
    return load_config(Path(args.config) if args.config else None, need_secrets=need_secrets)


def admin_config(args: argparse.Namespace) -> GatewayConfig:
    return load_from_args(args, need_secrets=False)
