"""``pairing: true`` in any platform section reaches admission's rule for that platform; the
default stays off everywhere (existing allowlists behave as before)."""

from __future__ import annotations

from pathlib import Path

import yaml

from chatgate.app.config import load_config
from chatgate.app.platforms import platform_access


def test_pairing_switches_reach_each_platforms_rule_and_default_to_off(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BOT", "1:a")
    monkeypatch.setenv("RELAY", "s")
    path = tmp_path / "c.yaml"
    relay = {
        "enabled": True, "url": "ws://127.0.0.1:1", "gateway_id": "g", "secret_env": "RELAY",
        "platforms": [{"platform": "discord", "bot_id": "b", "pairing": True},
                      {"platform": "slack", "bot_id": "s", "allow_users": ["U1"]}],
    }  # fmt: skip
    path.write_text(
        yaml.safe_dump(
            {
                "platforms": {
                    "telegram": {"enabled": True, "token_env": "BOT", "pairing": True},
                    "relay": relay,
                },
                "pairing": {"code_ttl_seconds": 5, "max_failed_approvals": 2},
            }
        )
    )
    config = load_config(path)
    rules = platform_access(config)
    assert {name: rule.pairing for name, rule in rules.items()} == {
        "web": False, "telegram": True, "discord": True, "slack": False,
    }  # fmt: skip
    assert rules["slack"].allow_users == frozenset({"U1"})
    limits = config.pairing.limits()
    assert (limits.code_ttl_seconds, limits.max_failed_approvals, limits.max_pending) == (5, 2, 20)
