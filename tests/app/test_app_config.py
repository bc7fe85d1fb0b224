"""Configuration: mistakes are caught at start-up, naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatgate.app.config import ConfigError, load_config


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("CHATGATE_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "chatgate.yaml"
    path.write_text(text)
    return path


def test_no_file_gives_the_embedded_defaults() -> None:
    config = load_config(None)
    assert config.http.host == "127.0.0.1"
    assert config.http.port == 8765
    assert config.store.sqlite.synchronous == "FULL"
    assert config.agent.kind == "echo"
    assert config.agent.echo.chunk_delay_ms == 30
    assert config.sessions.group_sessions_per_user is True
    assert config.sessions.thread_sessions_per_user is False


def test_unknown_key_is_named_with_its_full_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, "http:\n  prot: 9000\n"))
    assert "http.prot" in str(err.value)
    assert "unknown key" in str(err.value)


def test_wrong_type_is_named_with_its_full_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, "agent:\n  echo:\n    chunk_delay_ms: soon\n"))
    assert "agent.echo.chunk_delay_ms" in str(err.value)


def test_out_of_range_value_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, "scheduler:\n  max_concurrent_turns: 0\n"))
    assert "scheduler.max_concurrent_turns" in str(err.value)


def test_missing_secret_env_var_names_the_key_and_the_variable(tmp_path: Path) -> None:
    path = _write(tmp_path, "agent:\n  kind: openai\n  openai:\n    api_key_env: MY_MODEL_KEY\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "agent.openai.api_key_env" in str(err.value)
    assert "MY_MODEL_KEY" in str(err.value)


def test_secret_present_in_env_is_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_MODEL_KEY", "sk-test")
    config = load_config(
        _write(tmp_path, "agent:\n  kind: openai\n  openai:\n    api_key_env: MY_MODEL_KEY\n")
    )
    assert config.agent.kind == "openai"


def test_environment_overrides_the_yaml_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATGATE_HTTP__PORT", "9123")
    monkeypatch.setenv("CHATGATE_SESSIONS__BUSY_POLICY", "interrupt")
    config = load_config(_write(tmp_path, "http:\n  port: 9000\n"))
    assert config.http.port == 9123
    assert config.sessions.busy_policy == "interrupt"


def test_bad_environment_override_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATGATE_HTTP__PORT", "lots")
    with pytest.raises(ConfigError) as err:
        load_config(None)
    assert "http.port" in str(err.value)


def test_web_chat_on_a_public_address_requires_an_access_token(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, "http:\n  host: 0.0.0.0\n"))
    assert "platforms.web.access_token_env" in str(err.value)


def test_yaml_that_is_not_a_mapping_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="mapping"):
        load_config(_write(tmp_path, "- just\n- a list\n"))


def test_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_rate_limits_for_a_platform_not_served_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, "delivery:\n  rate_limits:\n    telegarm:\n      per_second: 10\n"))
    assert "delivery.rate_limits.telegarm" in str(err.value) and "web" in str(err.value)


def test_a_negative_rate_limit_is_named_with_its_full_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, "delivery:\n  rate_limits:\n    web:\n      per_second: -1\n"))
    assert "delivery.rate_limits.web.per_second" in str(err.value)


def test_rate_limits_for_a_served_platform_are_read(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, "delivery:\n  rate_limits:\n    web:\n      per_second: 50\n"))
    limits = config.delivery.rate_limits["web"]
    assert (limits.per_second, limits.chat_interval_seconds, limits.group_per_minute) == (50, None, None)
