"""Prompt values and texts: tokens, durations, outcomes (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatgate.domain.prompts import (
    MAX_TOKEN_BYTES,
    OPTION_IDS,
    PROMPT_ID_RE,
    Prompt,
    options_for,
    outcome_text,
    parse_prompt_token,
    prompt_text,
    prompt_token,
    shown_command,
)
from chatgate.domain.shell.danger import assess


def test_tokens_round_trip_and_stay_within_64_bytes() -> None:
    longest = "p" * 48
    for option in ("once", "session", "always", "deny"):
        token = prompt_token(longest, option)
        assert len(token.encode()) <= MAX_TOKEN_BYTES
        assert parse_prompt_token(token) == (longest, option)
    with pytest.raises(ValueError):
        prompt_token("p" * 60, "session")


PROMPT_IDS = st.from_regex(PROMPT_ID_RE, fullmatch=True)


@given(PROMPT_IDS, st.sampled_from(OPTION_IDS))
def test_every_prompt_id_and_option_round_trip_through_a_token(prompt_id: str, option_id: str) -> None:
    token = Prompt(prompt_id, "text", ()).token(option_id)
    assert token == prompt_token(prompt_id, option_id)
    assert len(token.encode()) <= MAX_TOKEN_BYTES
    assert parse_prompt_token(token) == (prompt_id, option_id)


@given(st.one_of(st.text(), st.builds(lambda i, o: f"hp1:{i}:{o}", st.text(), st.text())))
def test_the_parser_accepts_only_what_the_token_function_makes(text: str) -> None:
    parsed = parse_prompt_token(text)
    assert parsed is None or prompt_token(*parsed) == text


@pytest.mark.parametrize(
    "token",
    ["hp2:a.1:once", "hp1:a.1", "hp1:a.1:once:x", "hp1::once", "hp1:a b:once", "hp1:a.1:maybe", "approve"],
)
def test_anything_else_is_not_a_prompt_token(token: str) -> None:
    assert parse_prompt_token(token) is None


def test_options_keep_their_order_and_follow_the_offered_tiers() -> None:
    assert [o.id for o in options_for(("deny", "once", "session"))] == ["once", "session", "deny"]


def test_the_prompt_names_the_command_the_rules_the_answers_and_the_deadline() -> None:
    found = assess("sudo rm -rf ./x", "/w")  # sudo is not on the allow-list: unproven, once only
    text = prompt_text("sudo rm -rf ./x", found.explained, 90, found.offered_tiers, buttons=False)
    assert "sudo rm -rf ./x" in text and "[sudo]" in text and "[recursive_delete]" in text
    assert "`sudo` is not on the allow-list" in text and "[unproven]" in text
    assert "/approve session" not in text and "/approve always" not in text and "90 s" in text
    proven = assess("chmod -R 777 ./x", "/w")  # proven; its rule is session-only
    text = prompt_text("chmod -R 777 ./x", proven.explained, 90, proven.offered_tiers, buttons=False)
    assert "[chmod_world_writable]" in text and "[unproven]" not in text
    assert "/approve session" in text and "/approve always" not in text


def test_a_long_command_says_how_much_is_not_shown() -> None:
    shown = shown_command("x" * 2000)
    assert shown.startswith("x" * 1500) and "500 more characters not shown" in shown


@pytest.mark.parametrize(
    ("state", "tier", "reason", "text"),
    [
        ("approved", "once", None, "Approved (once) by Ann."),
        ("approved", "session", None, "Approved (for this session) by Ann."),
        ("approved", "always", None, "Approved (always) by Ann."),
        ("denied", None, None, "Denied by Ann — not run."),
        ("expired", None, "timeout", "Expired — not run (no answer within 5 min)."),
        ("expired", None, "restart", "Expired by a gateway restart — not run."),
        ("expired", None, "stopped", "Expired — not run (the reply was stopped)."),
    ],
)
def test_outcome_texts(state: str, tier: str | None, reason: str | None, text: str) -> None:
    assert outcome_text(state, tier, "Ann", reason, 300) == text
