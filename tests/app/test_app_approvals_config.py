"""The ``tools`` and ``approvals`` sections: defaults, validation naming the bad entry,
and the documented example file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from chatgate.app.config import ConfigError, load_config
from chatgate.domain.shell.danger import assess, load_rules

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "chatgate.example.yaml"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("CHATGATE_"):
            monkeypatch.delenv(name)


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "chatgate.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_shell_tool_is_off_and_prompts_wait_five_minutes_by_default() -> None:
    config = load_config(None)
    assert config.tools.enabled is False
    assert config.tools.workdir is None
    assert config.approvals.timeout_seconds == 300
    assert config.approvals.approvers == {}
    assert config.approvals.rules == []


def test_the_example_file_is_valid_and_states_the_defaults() -> None:
    example = load_config(EXAMPLE)
    defaults = load_config(None)
    assert example.tools == defaults.tools
    assert example.approvals == defaults.approvals


def test_the_commented_example_rule_in_the_example_file_loads_and_matches() -> None:
    text = EXAMPLE.read_text()
    start = text.index("  #   rules:\n")
    block = [line.removeprefix("  #") for line in text[start:].splitlines()[:5]]
    rules = load_rules(yaml.safe_load("\n".join(block))["rules"])
    assert [r.key for r in rules] == ["terraform_destroy"]
    matched = assess("terraform -chdir=infra destroy -auto-approve", "/w", rules).matched
    assert [r.key for r in matched] == ["terraform_destroy"]
    assert assess("terraform plan", "/w", rules).matched == ()


def test_the_environment_turns_the_tool_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATGATE_TOOLS__ENABLED", "true")
    monkeypatch.setenv("CHATGATE_APPROVALS__APPROVERS", '{"Web": ["ops-lead", 42]}')
    config = load_config(None)
    assert config.tools.enabled is True
    assert config.approvals.approvers == {"web": ["ops-lead", "42"]}


def test_a_bad_rule_stops_start_up_naming_the_entry_and_key(tmp_path: Path) -> None:
    path = _write(tmp_path, {"approvals": {"rules": [{"key": "terraform_destroy", "pattern": "(unclosed"}]}})
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert (
        "approvals.rules (line 2): approvals.rules[0]: danger rule 'terraform_destroy': invalid regex"
        in message
    )
    assert "Value error" not in message


def test_a_misspelled_rule_field_is_an_error(tmp_path: Path) -> None:
    rule = {"key": "k", "pattern": "^k(?: |$)", "max_teir": "always"}
    with pytest.raises(ConfigError, match=r"unknown field\(s\) max_teir"):
        load_config(_write(tmp_path, {"approvals": {"rules": [rule]}}))


def test_a_rule_may_not_reuse_a_built_in_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="already used by a built-in"):
        load_config(_write(tmp_path, {"approvals": {"rules": [{"key": "sudo", "pattern": "^x"}]}}))


@pytest.mark.parametrize(
    ("section", "values", "key"),
    [
        ("approvals", {"timeout_seconds": 0}, "approvals.timeout_seconds"),
        ("tools", {"timeout_seconds": -1}, "tools.timeout_seconds"),
        ("tools", {"output_cap": -1}, "tools.output_cap"),
        ("tools", {"enable": True}, "tools.enable"),
    ],
)
def test_out_of_range_or_unknown_keys_are_named(
    tmp_path: Path, section: str, values: dict[str, object], key: str
) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(_write(tmp_path, {section: values}))


def test_a_prompt_that_would_outlive_its_turn_is_a_config_error(tmp_path: Path) -> None:
    data = {
        "tools": {"enabled": True},
        "approvals": {"timeout_seconds": 900},
        "agent": {"turn_timeout_seconds": 600},
    }
    with pytest.raises(
        ConfigError, match=r"approvals\.timeout_seconds: 900 s is not below agent\.turn_timeout"
    ):
        load_config(_write(tmp_path, data))


def test_relay_mistakes_are_caught_at_start_up_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAY_SECRET_FOR_TEST", "s")
    relay = {
        "enabled": True,
        "url": "ws://127.0.0.1:9/relay",
        "gateway_id": "gw",
        "secret_env": "RELAY_SECRET_FOR_TEST",
    }
    one = [{"platform": "discord", "bot_id": "b"}]
    two = [*one, {"platform": "Discord", "bot_id": "c"}]
    cases = [
        ({**relay, "platforms": [{"platform": "discord"}]}, r"relay\.platforms\.0\.bot_id: required"),
        ({**relay, "gateway_id": "a:b", "platforms": one}, r"gateway_id"),
        (
            {**relay, "secret_env": "UNSET_RELAY_SECRET_X", "platforms": one},
            r"UNSET_RELAY_SECRET_X is not set",
        ),
        ({**relay, "platforms": two}, r"listed twice"),
        (
            {**relay, "outbound_timeout_seconds": 40, "platforms": one},
            r"40 s is not below delivery\.send_timeout",
        ),
    ]
    for values, message in cases:
        with pytest.raises(ConfigError, match=message):
            load_config(_write(tmp_path, {"platforms": {"relay": values}}))


@pytest.mark.parametrize(
    ("allow", "said"),
    [
        ({"make": {"options": ["-n", "-j NUMBER"]}}, "approvals.allow.make.options[1]"),
        ({"make": {"needs_sandbox": "yes"}}, "approvals.allow.make.needs_sandbox"),
        ({"/usr/bin/make": {}}, "approvals.allow./usr/bin/make"),
    ],
)
def test_a_bad_allow_list_entry_stops_start_up_naming_it(tmp_path: Path, allow: object, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, {"approvals": {"allow": allow}}))
    assert said in str(err.value)


def test_the_allow_list_and_the_sandbox_are_read_from_the_config(tmp_path: Path) -> None:
    config = load_config(
        _write(
            tmp_path,
            {"tools": {"sandbox": "bwrap", "sandbox_network": True}, "approvals": {"allow": {"rm": False}}},
        )
    )
    assert config.tools.sandbox == "bwrap" and config.tools.sandbox_network
    assert config.approvals.allow == {"rm": False}
    with pytest.raises(ConfigError, match=r"tools\.sandbox"):
        load_config(_write(tmp_path, {"tools": {"sandbox": "firejail"}}))
