"""The platforms.slack config section: defaults, deny by default, and each missing secret named by its key."""

from __future__ import annotations

from pathlib import Path

import pytest
from slack_fake import BOT_TOKEN, FakeSlack
from slack_fake.gateway import ENV, slack_config
from telegram_double import Gateways

from chatgate.app.config import ConfigError, GatewayConfig, load_config
from chatgate.app.platforms import platform_access
from chatgate.app.startup import CredentialInUse
from chatgate.platforms.kit.conform import conform


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "chatgate.yaml"
    path.write_text(text)
    return path


def test_slack_is_off_by_default_in_socket_mode_with_documented_defaults() -> None:
    slack = GatewayConfig().platforms.slack
    assert slack.enabled is False and slack.mode == "socket"
    assert slack.allow_users == [] and slack.allow_all is False
    assert slack.require_mention is True and slack.reply_in_thread is True
    assert slack.api_base == "https://slack.com/api/" and slack.slash_command == "/chatgate"


@pytest.mark.parametrize(
    ("yaml_text", "key"),
    [
        ("mode: socket\n    app_token_env: A\n", "platforms.slack.bot_token_env"),
        ("mode: socket\n    bot_token_env: B\n", "platforms.slack.app_token_env"),
        ("mode: http\n    bot_token_env: B\n", "platforms.slack.signing_secret_env"),
    ],
)
def test_each_secret_the_mode_needs_is_named_by_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, yaml_text: str, key: str
) -> None:
    monkeypatch.setenv("A", "xapp-1")
    monkeypatch.setenv("B", "xoxb-1")
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, f"platforms:\n  slack:\n    enabled: true\n    {yaml_text}"))
    assert key in str(err.value)


def test_a_token_env_that_is_not_set_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MY_SLACK_APP", raising=False)
    monkeypatch.setenv("MY_SLACK_BOT", "xoxb-1")
    text = (
        "platforms:\n  slack:\n    enabled: true\n    bot_token_env: MY_SLACK_BOT\n"
        "    app_token_env: MY_SLACK_APP\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, text))
    assert "platforms.slack.app_token_env" in str(err.value) and "MY_SLACK_APP" in str(err.value)


def test_unknown_keys_and_bad_values_are_refused_by_name(tmp_path: Path) -> None:
    for text, key in [
        ("platforms:\n  slack:\n    mode: websocket\n", "mode"),
        ("platforms:\n  slack:\n    bot_token: xoxb-in-yaml\n", "bot_token"),
        ("platforms:\n  slack:\n    slash_command: chatgate\n", "slash_command"),
    ]:
        with pytest.raises(ConfigError) as err:
            load_config(_write(tmp_path, text))
        assert key in str(err.value)


def test_slack_is_deny_by_default_and_cannot_also_be_relayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = conform(GatewayConfig, dict(platforms={"slack": {"enabled": True, "allow_users": ["U1"]}}))
    rules = platform_access(config)
    assert rules["slack"].allow_users == frozenset({"U1"}) and rules["slack"].allow_all is False
    monkeypatch.setenv("B", "xoxb-1")
    monkeypatch.setenv("A", "xapp-1")
    monkeypatch.setenv("R", "relay-secret")
    text = (
        "platforms:\n  slack:\n    enabled: true\n    bot_token_env: B\n    app_token_env: A\n"
        "  relay:\n    enabled: true\n    url: ws://127.0.0.1:1\n    gateway_id: g\n    secret_env: R\n"
        "    platforms:\n      - platform: slack\n        bot_id: b\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, text))
    assert "already served natively" in str(err.value)


async def test_one_gateway_per_bot_token_and_the_token_is_never_in_the_refusal(
    fake_slack: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    gateways = Gateways(tmp_path)
    config = slack_config(fake_slack, tmp_path)
    try:
        first = await gateways.start(config, state="one")
        with pytest.raises(CredentialInUse) as refused:
            await gateways.start(config, state="two")
        assert "slack" in str(refused.value) and BOT_TOKEN not in str(refused.value)
        lock_names = [p.name + p.read_text() for p in (tmp_path / "locks").iterdir()]
        assert lock_names and all(BOT_TOKEN not in text for text in lock_names)
        await gateways.stop(first)
        again = await gateways.start(config, state="two")  # released at stop
        await gateways.stop(again)
    finally:
        await gateways.stop_all()
