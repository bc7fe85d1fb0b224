"""Model profile mistakes are caught at start, naming the key (issue 28)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatgate.app.config import ConfigError, load_config
from chatgate.app.config.secrets import check_secrets
from chatgate.domain.profiles import ModelProfile

PROFILES = """agent:
  kind: openai
  openai: {model: big, api_key_env: MAIN_KEY, context_length: 32768, max_tokens: 1024}
  profiles:
    local: {base_url: "http://127.0.0.1:11434/v1", model: small, api_key_env: LOCAL_KEY, vision: true}
"""


def _load(tmp_path: Path, text: str) -> str:
    path = tmp_path / "chatgate.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    return str(err.value)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAIN_KEY", "x")
    monkeypatch.setenv("LOCAL_KEY", "y")


@pytest.mark.usefixtures("keys")
def test_profiles_load_with_the_agents_own_config_as_default(tmp_path: Path) -> None:
    path = tmp_path / "chatgate.yaml"
    path.write_text(PROFILES)
    profiles = load_config(path).agent.model_profiles()
    assert profiles.all == (
        ModelProfile("default", "big", 32768, 1024, False),
        ModelProfile("local", "small", None, None, True),
    )
    assert profiles.resolve("LOCAL").name == "local" and profiles.resolve("gone").name == "default"


@pytest.mark.usefixtures("keys")
def test_a_profiles_missing_key_variable_is_named(tmp_path: Path) -> None:
    path = tmp_path / "chatgate.yaml"
    path.write_text(PROFILES)
    config = load_config(path)
    with pytest.raises(ConfigError) as err:
        check_secrets(config, {"MAIN_KEY": "x"})
    assert "agent.profiles.local.api_key_env: environment variable LOCAL_KEY is not set" in str(err.value)
    check_secrets(config, {"MAIN_KEY": "x", "LOCAL_KEY": "y"})


@pytest.mark.parametrize(
    ("profiles", "says"),
    [
        ("default: {model: x}", "'default' is taken"),
        ("fast: {model: x}\n    FAST: {model: y}", "'FAST' is taken"),
        ("'my model': {model: x}", "is not a usable profile name"),
        ("fast: {model: x, context_length: 100}", "agent.profiles.fast.context_length (line 5)"),
        ("fast: {model: x, context_length: 4096, max_tokens: 4000}", "max_tokens must be under half"),
        (
            "fast: {model: x, modle: y}",
            "agent.profiles.fast.modle (line 5): unknown key; did you mean 'model'?",
        ),
    ],
)
def test_profile_mistakes_name_the_key(tmp_path: Path, profiles: str, says: str) -> None:
    message = _load(
        tmp_path, f"agent:\n  kind: openai\n  openai: {{model: m}}\n  profiles:\n    {profiles}\n"
    )
    assert "agent.profiles" in message and says in message, message


def test_profiles_need_the_openai_agent(tmp_path: Path) -> None:
    message = _load(tmp_path, "agent:\n  kind: echo\n  profiles:\n    fast: {model: x}\n")
    assert "agent.profiles needs agent.kind: openai" in message
