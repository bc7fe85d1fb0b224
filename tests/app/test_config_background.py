"""The schedules, hooks, background and delegation sections: mistakes are caught at load, naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatgate.app.config import ConfigError, load_config
from chatgate.app.config.background import task_settings, webhooks_for


def _load(tmp_path: Path, text: str) -> str:
    path = tmp_path / "chatgate.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    return str(err.value)


TARGET = "      target: {platform: web, chat_id: ops}\n"


def test_a_schedule_needs_exactly_one_timing(tmp_path: Path) -> None:
    both = "schedules:\n  jobs:\n    x:\n      every: 1h\n      cron: '0 * * * *'\n      text: hi\n" + TARGET
    assert "schedules.jobs.x" in (message := _load(tmp_path, both)) and "exactly one of every" in message
    neither = "schedules:\n  jobs:\n    x:\n      text: hi\n" + TARGET
    assert "exactly one of every" in _load(tmp_path, neither)


def test_bad_intervals_cron_names_and_targets_are_named(tmp_path: Path) -> None:
    bad_every = "schedules:\n  jobs:\n    x:\n      every: soon\n      text: hi\n" + TARGET
    assert "'soon' is not a duration" in _load(tmp_path, bad_every)
    bad_cron = "schedules:\n  jobs:\n    x:\n      cron: '99 * * * *'\n      text: hi\n" + TARGET
    assert "not a cron expression" in _load(tmp_path, bad_cron)
    bad_name = "schedules:\n  jobs:\n    Bad Name:\n      every: 1h\n      text: hi\n" + TARGET
    assert "a schedule name is lower-case" in _load(tmp_path, bad_name)
    no_target = (
        "schedules:\n  jobs:\n    x:\n      every: 1h\n      text: hi\n      target: {platform: web}\n"
    )
    assert "name a chat (platform and chat_id) or a session" in _load(tmp_path, no_target)


def test_a_hook_route_whose_secret_is_not_set_is_refused_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_HOOK_SECRET", raising=False)
    text = (
        "hooks:\n  enabled: true\n  routes:\n    gh:\n      secret_env: NO_SUCH_HOOK_SECRET\n"
        "      target: {session: 'agent:main:web:dm:ops'}\n"
    )
    message = _load(tmp_path, text)
    assert "hooks.routes.gh.secret_env: environment variable NO_SUCH_HOOK_SECRET is not set" in message


def test_a_hook_secret_is_read_from_its_env_var_and_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_SECRET_FOR_TEST", "hunter2")
    path = tmp_path / "chatgate.yaml"
    path.write_text(
        "hooks:\n  enabled: true\n  routes:\n    gh:\n      secret_env: HOOK_SECRET_FOR_TEST\n"
        "      target: {platform: web, chat_id: ops}\n"
    )
    config = load_config(path)
    routes = webhooks_for(config.hooks, {"HOOK_SECRET_FOR_TEST": "hunter2"})
    assert routes["gh"].secret == b"hunter2" and "hunter2" not in repr(routes["gh"])


def test_background_and_delegation_settings(tmp_path: Path) -> None:
    path = tmp_path / "chatgate.yaml"
    path.write_text(
        "delegation:\n  enabled: true\n  max_age_hours: 2\nbackground:\n  max_running_per_session: 3\n"
    )
    config = load_config(path)
    settings = task_settings(config.background, config.delegation)
    assert settings is not None
    assert (settings.delegation, settings.max_age_hours, settings.max_running_per_session) == (True, 2.0, 3)
    defaults = load_config(None)
    assert task_settings(defaults.background, defaults.delegation) is not None  # /bg on, delegate off
    assert defaults.delegation.enabled is False and defaults.schedules.enabled is True
