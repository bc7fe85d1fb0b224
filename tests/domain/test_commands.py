"""Control commands parsed at admission."""

from __future__ import annotations

import pytest

from chatgate.domain.commands import CONTROL_COMMANDS, Command, help_text, parse_command


@pytest.mark.parametrize("name", ["help", "new", "stop", "status", "approve", "deny"])
def test_each_control_command_parses_to_its_name_with_no_args(name: str) -> None:
    assert parse_command(f"/{name}") == Command(name, "")


def test_reset_is_an_alias_for_new() -> None:
    assert parse_command("/reset") == Command("new", "")
    assert parse_command("/reset please") == Command("new", "please")


def test_command_names_are_case_insensitive() -> None:
    assert parse_command("/HELP") == Command("help", "")
    assert parse_command("/Reset") == Command("new", "")


def test_surrounding_whitespace_is_ignored() -> None:
    assert parse_command("  /stop  \n") == Command("stop", "")


def test_bot_mention_for_this_bot_is_accepted_case_insensitively() -> None:
    assert parse_command("/status@MyBot", bot_name="mybot") == Command("status", "")
    assert parse_command("/new@mybot fresh start", bot_name="MyBot") == Command("new", "fresh start")


def test_bot_mention_for_another_bot_is_rejected() -> None:
    assert parse_command("/status@MyBot", bot_name="otherbot") is None


def test_bot_mention_is_rejected_when_this_bot_has_no_name() -> None:
    assert parse_command("/status@MyBot") is None


def test_unmentioned_command_is_accepted_whatever_the_bot_name() -> None:
    assert parse_command("/status", bot_name="mybot") == Command("status", "")


def test_unknown_slash_word_is_not_a_command() -> None:
    assert parse_command("/foo") is None
    assert parse_command("/foo@mybot", bot_name="mybot") is None


@pytest.mark.parametrize(
    "text", ["hello", "", "   ", "/", "status", "please /stop", "/ stop", "/@mybot", "//stop"]
)
def test_non_command_text_is_not_a_command(text: str) -> None:
    assert parse_command(text, bot_name="mybot") is None


def test_args_after_the_command_are_captured_and_trimmed() -> None:
    assert parse_command("/new   talk about  cats  ") == Command("new", "talk about  cats")
    assert parse_command("/status verbose") == Command("status", "verbose")


def test_args_may_span_lines() -> None:
    assert parse_command("/new first line\nsecond line") == Command("new", "first line\nsecond line")


@pytest.mark.parametrize("sep", ["\n", "\t"])
def test_command_word_ends_at_any_whitespace(sep: str) -> None:
    assert parse_command(f"/new{sep}hello") == Command("new", "hello")


def test_help_text_lists_every_command_with_its_summary() -> None:
    text = help_text()
    lines = text.splitlines()
    assert lines[0] == "Commands:"
    for spec in CONTROL_COMMANDS:
        matching = [line for line in lines if line.startswith(f"/{spec.name} ")]
        assert len(matching) == 1, spec.name
        assert spec.summary in matching[0]
    assert len(lines) == 1 + len(CONTROL_COMMANDS)


def test_control_commands_are_exactly_the_documented_ones() -> None:
    assert [spec.name for spec in CONTROL_COMMANDS] == [
        "help", "new", "stop", "status", "model", "approve", "deny", "remind", "every", "bg", "tasks",
        "cancel", "schedules",
    ]  # fmt: skip


def test_schedule_commands_take_their_arguments() -> None:
    assert parse_command("/remind 10m stretch") == Command("remind", "10m stretch")
    assert parse_command("/every 0 9 * * 1-5 standup") == Command("every", "0 9 * * 1-5 standup")
    assert parse_command("/Schedules delete ab12cd34") == Command("schedules", "delete ab12cd34")


def test_approve_takes_its_tier_as_args() -> None:
    assert parse_command("/approve") == Command("approve", "")
    assert parse_command("/Approve Session") == Command("approve", "Session")
    assert parse_command("/deny") == Command("deny", "")
