"""The platforms.telegram config section: defaults, deny by default, and a secret that names its key."""

from __future__ import annotations

from pathlib import Path

import pytest
from telegram_double import TOKEN

from chatgate.app.config import ConfigError, GatewayConfig, load_config
from chatgate.app.gateway import Gateway
from chatgate.platforms.kit.conform import conform

ENV = "MY_TELEGRAM_TOKEN"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "chatgate.yaml"
    path.write_text(text)
    return path


def test_telegram_is_off_by_default_with_documented_defaults() -> None:
    telegram = GatewayConfig().platforms.telegram
    assert telegram.enabled is False
    assert telegram.allow_users == []
    assert telegram.api_base == "https://api.telegram.org"
    assert telegram.poll_timeout_seconds == 25
    assert telegram.drop_pending_updates is False


def test_enabling_telegram_without_token_env_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, "platforms:\n  telegram:\n    enabled: true\n"))
    assert "platforms.telegram.token_env" in str(err.value)


def test_a_token_env_that_is_not_set_names_the_key_and_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, f"platforms:\n  telegram:\n    enabled: true\n    token_env: {ENV}\n"))
    assert "platforms.telegram.token_env" in str(err.value) and ENV in str(err.value)


def test_numeric_user_ids_in_yaml_are_accepted_as_strings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, TOKEN)
    section = f"platforms:\n  telegram:\n    enabled: true\n    token_env: {ENV}\n"
    path = _write(tmp_path, section + "    allow_users: [123456, '789']\n")
    assert load_config(path).platforms.telegram.allow_users == ["123456", "789"]


def test_unknown_telegram_key_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, "platforms:\n  telegram:\n    tokn_env: X\n"))
    assert "platforms.telegram.tokn_env" in str(err.value)


def test_a_malformed_token_is_refused_without_echoing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "not a token secret-ish-value")
    config = conform(GatewayConfig, dict(platforms={"telegram": {"enabled": True, "token_env": ENV}}))
    with pytest.raises(ConfigError) as err:
        Gateway(config, tmp_path / "state")
    assert "platforms.telegram.token_env" in str(err.value)
    assert "secret-ish-value" not in str(err.value)
