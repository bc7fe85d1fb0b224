"""A gateway config with only Slack enabled, pointed at a ``FakeSlack``, and what its database holds."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from slack_fake.payloads import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET
from slack_fake.webapi import FakeSlack

BOT_TOKEN_ENV = "FAKE_SLACK_BOT_TOKEN"
APP_TOKEN_ENV = "FAKE_SLACK_APP_TOKEN"
SIGNING_SECRET_ENV = "FAKE_SLACK_SIGNING_SECRET"
ENV = {BOT_TOKEN_ENV: BOT_TOKEN, APP_TOKEN_ENV: APP_TOKEN, SIGNING_SECRET_ENV: SIGNING_SECRET}


def slack_values(fake: FakeSlack, tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    """Config values (a dict, for ``conform(GatewayConfig, values)`` or a subprocess's YAML)."""
    slack: dict[str, Any] = {
        "enabled": True,
        "bot_token_env": BOT_TOKEN_ENV,
        "app_token_env": APP_TOKEN_ENV,
        "allow_users": ["U1", "U2"],
        "api_base": fake.api_base,
    }
    slack.update(overrides.pop("slack", {}))
    values: dict[str, Any] = {
        "http": {"port": 0},
        "agent": {"echo": {"chunk_delay_ms": 2}},
        "platforms": {"web": {"enabled": False}, "slack": slack},
        "locks": {"credential_dir": str(tmp_path / "locks")},
        "shutdown": {"drain_seconds": 5, "outbox_flush_seconds": 2},
    }
    values.update(overrides)
    return values


def slack_config(fake: FakeSlack, tmp_path: Path, **overrides: Any) -> Any:
    from chatgate.app.config import GatewayConfig
    from chatgate.platforms.kit.conform import conform

    return conform(GatewayConfig, dict(**slack_values(fake, tmp_path, **overrides)))


def rows(db: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def echo_of(text: str) -> str:
    return f"echo: {text}"
