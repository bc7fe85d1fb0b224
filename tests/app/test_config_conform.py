"""The config's own check (``platforms/kit/conform.py``): every mistake at once, each at its
full key path and line, through the real loader and real YAML files."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatgate.app.config import ConfigError, GatewayConfig, load_config
from chatgate.platforms.kit.conform import Invalid, conform


def _problems(data: dict[str, object]) -> dict[str, str]:
    with pytest.raises(Invalid) as err:
        conform(GatewayConfig, data)
    return {".".join(str(p) for p in pr.path): pr.message for pr in err.value.problems}


def test_every_mistake_is_reported_at_once_each_at_its_own_key() -> None:
    problems = _problems(
        {
            "http": {"port": -1, "prot": 1},
            "agent": {"kind": "openai", "profiles": {"fast": {"timeout_seconds": "soon"}}},
            "sessions": {"busy_policy": "shout"},
        }
    )
    assert problems == {
        "http.port": "expected a whole number >= 0",
        "http.prot": "unknown key",
        # a mapping's key is in the path (msgspec alone would say `profiles[...]`)
        "agent.profiles.fast.timeout_seconds": "expected a number, got text",
        "sessions.busy_policy": "must be one of: queue, interrupt",
    }


def test_a_mistake_under_a_mapping_key_names_that_keys_line(tmp_path: Path) -> None:
    path = tmp_path / "chatgate.yaml"
    text = "agent:\n  kind: openai\n  profiles:\n    fast:\n      model: m\n      max_tokens: 0\n"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path, need_secrets=False)
    assert "agent.profiles.fast.max_tokens (line 6): expected a whole number >= 1" in str(err.value)


def test_a_rule_across_keys_is_reported_at_its_section() -> None:
    problems = _problems({"agent": {"system_prompt": "be brief", "system_prompt_file": "/p.txt"}})
    assert problems == {"agent": "set agent.system_prompt or agent.system_prompt_file, not both"}


def test_a_keys_own_rule_runs_on_the_converted_value_and_names_the_key() -> None:
    problems = _problems({"http": {"trusted_proxies": ["10.0.0.0/8", "not-a-net"]}})
    assert problems == {
        "http.trusted_proxies": "'not-a-net' is not an IP address or network (10.0.0.0/8, ::1)"
    }
    config = conform(GatewayConfig, {"http": {"trusted_proxies": [" 10.1.2.3/8 "]}})
    assert config.http.trusted_proxies == ["10.0.0.0/8"]


def test_a_default_that_follows_another_key_only_when_it_is_left_out() -> None:
    assert conform(GatewayConfig, {"http": {"max_connections": 100}}).http.max_unauthenticated == 100
    assert conform(GatewayConfig, {}).http.max_unauthenticated == 256
    problems = _problems({"http": {"max_connections": 100, "max_unauthenticated": 200}})
    assert problems == {"http": "http.max_unauthenticated (200) must be at most http.max_connections (100)"}
    assert conform(GatewayConfig, {"store": {"url": "postgresql://u@h/db"}}).store.backend == "postgres"


def test_numbers_are_taken_as_ids_only_where_a_section_says_so() -> None:
    config = conform(GatewayConfig, {"platforms": {"telegram": {"allow_users": [42, "43"]}}})
    assert config.platforms.telegram.allow_users == ["42", "43"]
    assert _problems({"agent": {"openai": {"model": 4}}}) == {
        "agent.openai.model": "expected text, got a whole number"
    }


def test_a_variables_text_is_converted_to_the_keys_type() -> None:
    data = {
        "http": {"port": "9000"},
        "tools": {"enabled": "yes", "sandbox_network": "Off"},
        "log_level": "debug",
    }
    config = conform(GatewayConfig, data)
    assert (config.http.port, config.tools.enabled, config.tools.sandbox_network) == (9000, True, False)
    assert config.log_level == "DEBUG"


def test_a_value_of_the_wrong_shape_is_named_without_being_echoed() -> None:
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    problems = _problems({"http": secret, "platforms": {"telegram": {"allow_users": secret}}})
    assert problems == {
        "http": "must be a section of keys (key: value lines), not text",
        "platforms.telegram.allow_users": "must be a list (- item lines or [a, b]), not text",
    }
    assert all(secret not in message for message in problems.values())


def test_a_required_key_left_out_is_named() -> None:
    problems = _problems({"hooks": {"routes": {"deploy": {"target": {"session": "agent:main:web:dm:ops"}}}}})
    assert problems == {"hooks.routes.deploy.secret_env": "required: this key has no default"}


def test_an_unknown_platform_is_an_unknown_key_and_the_rest_is_still_checked() -> None:
    problems = _problems({"platforms": {"telegarm": {}, "telegram": {"poll_timeout_seconds": 99}}})
    assert problems == {
        "platforms.telegarm": "unknown key",
        "platforms.telegram.poll_timeout_seconds": "expected a whole number <= 50",
    }


def test_calling_a_section_gives_a_fresh_default_for_each_config() -> None:
    one, two = GatewayConfig(), GatewayConfig()
    one.http.port = 1
    one.approvals.approvers["web"] = ["ann"]
    assert two.http.port == 8765 and two.approvals.approvers == {}


def test_the_unauthenticated_default_follows_max_connections_however_it_is_written() -> None:
    for written in ("10", " 10", 10.0):
        assert conform(GatewayConfig, {"http": {"max_connections": written}}).http.max_unauthenticated == 10
    # a bad max_connections is reported once, at its own key, not again at the key it sets
    assert _problems({"http": {"max_connections": 0}}) == {
        "http.max_connections": "expected a whole number >= 1"
    }


def test_numbers_from_a_variable_are_read_as_python_reads_them() -> None:
    for written in ("9000 ", "+9000", "9_000", "9000\r"):
        assert conform(GatewayConfig, {"http": {"port": written}}).http.port == 9000
    assert conform(GatewayConfig, {"delivery": {"max_age_seconds": " 2.5\r"}}).delivery.max_age_seconds == 2.5


def test_a_value_that_is_not_a_choice_is_not_echoed() -> None:
    token = "7777000111:AAH-secret-token-do-not-log-9f8e7d"
    problems = _problems({"platforms": {"web": {"auth": token}}, "store": {"backend": token}})
    assert problems == {
        "platforms.web.auth": "must be one of: none, token, accounts",
        "store.backend": "must be one of: sqlite, postgres",
    }


def test_a_matrix_token_is_refused_even_with_spaces_around_it() -> None:
    section = {
        "enabled": True,
        "homeserver": "https://m.example",
        "access_token_env": " syt_Ym90_AbCdEfGhIjKlMn_0a1B2c",
    }
    problems = _problems({"platforms": {"matrix": section}})
    assert list(problems) == ["platforms.matrix.access_token_env"]
    assert "is an access token" in problems["platforms.matrix.access_token_env"]
    assert "syt_" not in problems["platforms.matrix.access_token_env"]


@pytest.mark.parametrize(
    ("data", "key"),
    [
        (
            {"store": {"url": "postgresql://u@db/chat", "postgres": {"schema": "fleet\n"}}},
            "store.postgres.schema",
        ),
        ({"platforms": {"slack": {"slash_command": "/ask\n"}}}, "platforms.slack.slash_command"),
    ],
)
def test_a_pattern_must_match_the_whole_value_with_no_line_end_after_it(
    data: dict[str, object], key: str
) -> None:
    assert list(_problems(data)) == [key]


def test_a_yaml_anchor_used_inside_itself_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "chatgate.yaml"
    path.write_text("log_level: INFO\nhttp: &a\n  trusted_proxies: [*a]\n")
    with pytest.raises(ConfigError, match=r"line 2: a YAML anchor is used inside itself"):
        load_config(path)
