"""Start-up refusals of ``platforms.web.auth``, each naming the key to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatgate.app.config import ConfigError, load_config
from chatgate.app.gateway import Gateway
from support.accounts_harness import accounts_config


def _load(tmp_path: Path, text: str) -> None:
    path = tmp_path / "chatgate.yaml"
    path.write_text(text)
    load_config(path)


def test_a_public_bind_without_sign_in_is_refused_naming_the_auth_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, "http:\n  host: 0.0.0.0\nplatforms:\n  web:\n    auth: none\n")
    assert str(err.value).startswith("platforms.web.auth:") and "chatgate user add" in str(err.value)


def test_a_public_bind_with_accounts_starts_the_checks_clean(tmp_path: Path) -> None:
    _load(tmp_path, "http:\n  host: 0.0.0.0\nplatforms:\n  web:\n    auth: accounts\n")


def test_token_auth_needs_the_token_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, "platforms:\n  web:\n    auth: token\n")
    assert str(err.value).startswith("platforms.web.auth:") and "access_token_env" in str(err.value)


def test_accounts_and_a_shared_token_together_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEB_TOKEN_FOR_TEST", "x")
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, "platforms:\n  web:\n    auth: accounts\n    access_token_env: WEB_TOKEN_FOR_TEST\n")
    assert str(err.value).startswith("platforms.web.access_token_env:")


def test_an_unknown_auth_mode_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, "platforms:\n  web:\n    auth: passwords\n")
    assert "platforms.web.auth" in str(err.value)


async def test_accounts_with_no_user_refuse_to_start_naming_the_key(tmp_path: Path) -> None:
    gateway = Gateway(accounts_config(), tmp_path / "state")
    try:
        with pytest.raises(ConfigError) as err:
            await gateway.start()
    finally:
        await gateway.stop()
    assert str(err.value).startswith("platforms.web.auth: accounts, but there are no users")
    assert "chatgate user add" in str(err.value)
