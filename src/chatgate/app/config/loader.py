"""Loading the config: the YAML file, the environment, validation, then the start-up checks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from chatgate.app.config.env import overlay
from chatgate.app.config.errors import describe, parse_yaml
from chatgate.app.config.extras import check_extras
from chatgate.app.config.model import ConfigError, GatewayConfig
from chatgate.app.config.rates import rate_limit_problem
from chatgate.app.config.secrets import ANY_SECRET, check_secrets, served_platforms
from chatgate.platforms.kit.conform import Invalid, KeyPath, conform


def load_config(
    path: Path | None, *, check_installed: bool = True, need_secrets: bool = True
) -> GatewayConfig:
    """Read, merge with the environment and validate; ``ConfigError`` names the key and its line.

    ``check_installed=False`` skips the check that enabled features have their pip extra;
    ``need_secrets=False`` the check that every secret a key names is set (the admin commands
    read the state, not the platforms)."""
    where = str(path) if path else "defaults"
    data: Any = {}
    lines: dict[KeyPath, int] = {}
    if path is not None:
        try:
            data, lines = parse_yaml(path, path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"config file {path} does not exist") from exc
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        data = data or {}
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path} must contain a mapping at the top level")
    data = overlay(data, os.environ, [f.encode_name for f in msgspec.structs.fields(GatewayConfig)])
    try:
        config = conform(GatewayConfig, data)
    except Invalid as exc:
        where += " (and CHATGATE_* environment variables)"
        raise ConfigError(describe(exc, where, GatewayConfig, lines)) from exc
    if check_installed and (needs := check_extras(config)) is not None:
        raise ConfigError(needs)
    check_secrets(config, os.environ if need_secrets else ANY_SECRET)
    check_budgets(config)
    return config


def check_budgets(config: GatewayConfig) -> None:
    """Timeouts that only make sense in one order, rate budgets for served platforms."""
    if (problem := rate_limit_problem(config.delivery.rate_limits, served_platforms(config))) is not None:
        raise ConfigError(problem)
    approvals, turn = config.approvals.timeout_seconds, config.agent.turn_timeout_seconds
    if config.tools.enabled and approvals >= turn:
        raise ConfigError(
            f"approvals.timeout_seconds: {approvals:g} s is not below agent.turn_timeout_seconds"
            f" ({turn:g} s); the turn would time out while its prompt still waits. Lower it or raise"
            " the turn timeout"
        )
