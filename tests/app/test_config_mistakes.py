"""Config mistakes say where they are and what to write instead (issue 18, item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatgate.app.config import ConfigError, load_config


def _load(tmp_path: Path, text: str) -> str:
    path = tmp_path / "chatgate.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    return str(err.value)


def test_a_misspelt_key_names_its_line_and_the_nearest_valid_key(tmp_path: Path) -> None:
    message = _load(tmp_path, "http:\n  port: 9000\nsessions:\n  busy_polcy: queue\n")
    assert "sessions.busy_polcy (line 4): unknown key; did you mean 'busy_policy'?" in message


def test_a_misspelt_key_inside_a_list_of_sections_gets_a_hint_too(tmp_path: Path) -> None:
    text = "platforms:\n  relay:\n    platforms:\n      - platform: discord\n        alow_all: true\n"
    message = _load(tmp_path, text)
    assert "platforms.relay.platforms.0.alow_all (line 5): unknown key; did you mean 'allow_all'?" in message


def test_a_key_with_no_near_match_lists_the_valid_ones(tmp_path: Path) -> None:
    message = _load(tmp_path, "http:\n  zzz: 1\n")
    assert (
        "http.zzz (line 2): unknown key; valid keys here: auth_timeout_seconds, body_timeout_seconds,"
        " header_timeout_seconds, host, keep_alive_seconds, max_connections, max_unauthenticated,"
        " max_unauthenticated_per_address, min_body_bytes_per_second, port, trusted_proxies" in message
    )


def test_a_wrong_value_names_its_line(tmp_path: Path) -> None:
    message = _load(tmp_path, "\n\nhttp:\n  port: ninety\n")
    assert "http.port (line 4):" in message


def test_yaml_syntax_errors_name_the_file_and_line_not_a_unicode_string(tmp_path: Path) -> None:
    message = _load(tmp_path, "http:\n  port: 9000\n  host: [unclosed\n")
    assert "<unicode string>" not in message
    assert f"{tmp_path / 'chatgate.yaml'}, line " in message
    assert "is not valid YAML" in message


@pytest.mark.parametrize("written", ["info", "Info", "INFO"])
def test_choices_are_accepted_in_any_case(tmp_path: Path, written: str) -> None:
    path = tmp_path / "chatgate.yaml"
    path.write_text(f"log_level: {written}\nsessions:\n  busy_policy: Interrupt\n")
    config = load_config(path)
    assert config.log_level == "INFO"
    assert config.sessions.busy_policy == "interrupt"


def test_a_choice_that_is_not_one_is_still_refused(tmp_path: Path) -> None:
    message = _load(tmp_path, "log_level: loud\n")
    assert "log_level (line 1):" in message


SECRETS = [
    "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",  # a Telegram bot token
    "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",  # an OpenAI key
    "xoxb-1234-5678-abcdefgh",  # a Slack token
    "0f9e8d7c6b5a49382716f5e4d3c2b1a0ffeeddcc",  # a hex secret
]


@pytest.mark.parametrize("secret", SECRETS)
def test_a_secret_pasted_into_an_env_key_is_refused_and_never_echoed(tmp_path: Path, secret: str) -> None:
    text = f"platforms:\n  telegram:\n    enabled: true\n    token_env: '{secret}'\n"
    message = _load(tmp_path, text)
    assert "platforms.telegram.token_env (line 4):" in message
    assert "name of an environment variable" in message
    assert secret not in message
    assert secret[:12] not in message


@pytest.mark.parametrize("name", ["TELEGRAM_BOT_TOKEN", "openai_key", "_X1"])
def test_an_env_key_holding_a_variable_name_is_fine(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, "value")
    path = tmp_path / "chatgate.yaml"
    path.write_text(f"agent:\n  kind: openai\n  openai:\n    api_key_env: {name}\n")
    assert load_config(path).agent.openai.api_key_env == name
