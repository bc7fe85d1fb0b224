"""Slack outbound against the fake: Block Kit approval prompts answered by a click, 429s with
Retry-After honoured, the assistant thread status skipped without its scope, long replies split,
and the agent's Markdown rendered as mrkdwn."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_fake import FakeSlack, block_action, message_event
from slack_fake.gateway import ENV, echo_of, rows, slack_config
from telegram_double import Gateways

from chatgate.domain.prompts import MAX_TOKEN_BYTES, parse_prompt_token
from chatgate.platforms.slack.mrkdwn import markdown_to_mrkdwn


@pytest.fixture(autouse=True)
def _tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


def _buttons(blocks: list[dict[str, object]] | None) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for block in blocks or []:
        if block.get("type") == "actions":
            out.extend(block["elements"])  # type: ignore[arg-type]
    return out


async def test_a_block_kit_prompt_is_answered_by_a_click_and_a_late_click_is_told_privately(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    (workdir / "x").mkdir(parents=True)
    config = slack_config(
        fake_slack,
        tmp_path,
        tools={"enabled": True, "workdir": str(workdir)},
        approvals={"timeout_seconds": 30},
    )
    gateway = await gateways.start(config)
    await fake_slack.socket.connected.wait()
    await fake_slack.push_event(message_event("D1", "U1", "!sh rm -rf ./x"))
    await fake_slack.wait_for(lambda: any(_buttons(m.blocks) for m in fake_slack.view("D1")), what="prompt")
    prompt = next(m for m in fake_slack.view("D1") if _buttons(m.blocks))
    tokens = [b["value"] for b in _buttons(prompt.blocks)]
    assert all(parse_prompt_token(t) and len(t.encode()) <= MAX_TOKEN_BYTES for t in tokens)
    assert "rm -rf ./x" in prompt.text
    once = next(t for t in tokens if t.endswith(":once"))
    click = await fake_slack.push_interactive(block_action("D1", "U1", prompt.ts, once))
    await fake_slack.wait_for(lambda: not (workdir / "x").exists(), what="the approved command to run")
    await fake_slack.wait_for(lambda: not _buttons(prompt.blocks), what="the buttons to go")
    assert "Approved" in prompt.text and click.acked_at is not None
    db = gateway.state_dir / "chatgate.db"
    assert rows(db, "SELECT state, tier FROM approvals") == [("approved", "once")]

    late = await fake_slack.push_interactive(block_action("D1", "U1", prompt.ts, once))
    await fake_slack.wait_for(lambda: bool(fake_slack.ephemerals), what="the late click's private answer")
    assert late.acked_at is not None and fake_slack.ephemerals[0][:2] == ("D1", "U1")
    assert rows(db, "SELECT state, tier FROM approvals") == [("approved", "once")]


async def test_a_429_pauses_the_channel_for_retry_after_and_the_reply_still_arrives_once(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    await gateways.start(slack_config(fake_slack, tmp_path, agent={"echo": {"chunk_delay_ms": 0}}))
    await fake_slack.socket.connected.wait()
    fake_slack.rate_limit("chat.postMessage", retry_after=2, times=1, channel="D4")
    await fake_slack.push_event(message_event("D4", "U1", "slow down"))
    await fake_slack.wait_for(lambda: len(fake_slack.view("D4")) >= 1, timeout=60, what="the reply")
    posts = [c for c in fake_slack.calls_of("chat.postMessage") if c.params.get("channel") == "D4"]
    limited = [c for c in posts if c.status == 429]
    assert len(limited) == 1 and [m.text for m in fake_slack.view("D4")] == [echo_of("slow down")]
    after = [c for c in posts if c.status == 200]
    assert after[0].at - limited[0].at >= 2.0, "the retry came before Retry-After"


async def test_the_assistant_status_shows_in_a_thread_and_is_skipped_without_the_scope(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    # The status is the typing indicator: a turn shows it once it has been silent for 0.5 s
    # (engine/streaming.py, TYPING_DELAY), so this echo waits 0.7 s before each chunk.
    await gateways.start(slack_config(fake_slack, tmp_path, agent={"echo": {"chunk_delay_ms": 700}}))
    await fake_slack.socket.connected.wait()
    await fake_slack.push_event(message_event("D5", "U1", "in a thread", thread_ts="1700000000.000001"))
    await fake_slack.wait_for(lambda: len(fake_slack.view("D5")) >= 1, what="the reply")
    statuses = fake_slack.calls_of("assistant.threads.setStatus")
    assert statuses and statuses[0].params["thread_ts"] == "1700000000.000001"
    assert fake_slack.view("D5")[0].thread_ts == "1700000000.000001"

    fake_slack.scopes = frozenset({"chat:write"})
    for n in range(2):
        await fake_slack.push_event(message_event("D6", "U1", f"no scope {n}", thread_ts="1700000000.000002"))
        await fake_slack.wait_for(lambda n=n: len(fake_slack.view("D6")) >= n + 1, what="the reply")
    refused = [
        c for c in fake_slack.calls_of("assistant.threads.setStatus") if c.params["channel_id"] == "D6"
    ]
    assert len(refused) == 1, "after missing_scope the status is not asked for again"


async def test_a_long_reply_arrives_as_ordered_parts_within_the_limit(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    await gateways.start(slack_config(fake_slack, tmp_path, agent={"echo": {"chunk_delay_ms": 0}}))
    await fake_slack.socket.connected.wait()
    text = " ".join(f"word{n}" for n in range(1500))  # ~11,000 characters
    await fake_slack.push_event(message_event("D8", "U1", text))

    def joined() -> str:
        return " ".join(m.text.strip() for m in fake_slack.view("D8"))

    await fake_slack.wait_for(lambda: joined() == echo_of(text), what="every part, in order")
    parts = [m.text for m in fake_slack.view("D8")]
    assert len(parts) >= 3 and all(len(p) <= 3_800 for p in parts)


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold** and *it* and _it_", "*bold* and _it_ and _it_"),
        ("~~gone~~ 2 * 3 * 4", "~gone~ 2 * 3 * 4"),
        ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
        ("# Title", "*Title*"),
        ("- one\n* two", "• one\n• two"),
        ("> quoted <x>", "> quoted &lt;x&gt;"),
        (
            "[docs](https://ex.am/ple) [js](javascript:alert)",
            "<https://ex.am/ple|docs> [js](javascript:alert)",
        ),
        ("`**raw** <x>`", "`**raw** &lt;x&gt;`"),
        ("```python\nif a < b:\n    **x**\n```", "```\nif a &lt; b:\n    **x**\n```"),
        ("```\nopen fence", "```\nopen fence\n```"),
        ("snake_case_name", "snake_case_name"),
    ],
)
def test_markdown_becomes_mrkdwn(markdown: str, mrkdwn: str) -> None:
    assert markdown_to_mrkdwn(markdown) == mrkdwn


async def test_a_slow_reply_streams_as_chat_update_previews_of_one_message_that_becomes_the_final(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    config = slack_config(fake_slack, tmp_path, agent={"echo": {"chunk_delay_ms": 120, "chunk_chars": 4}})
    await gateways.start(config)
    await fake_slack.socket.connected.wait()
    text = "a reply slow enough to be previewed several times before it ends"
    await fake_slack.push_event(message_event("D10", "U1", text))
    await fake_slack.wait_for(
        lambda: [m.text for m in fake_slack.view("D10")] == [echo_of(text)], timeout=60, what="the final"
    )
    [first] = [c for c in fake_slack.calls_of("chat.postMessage") if c.params.get("channel") == "D10"]
    updates = [c for c in fake_slack.calls_of("chat.update") if c.params.get("channel") == "D10"]
    assert first.params["text"].endswith("▍"), "the first preview has no cursor"
    assert updates and all(c.params["text"].endswith("▍") for c in updates[:-1])
    assert updates[-1].params["text"] == echo_of(text), "the final did not edit the preview"


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([*"ab *_~`#->[](<&|\n", "http://x", "**", "```"]), max_size=40).map("".join))
def test_mrkdwn_escapes_every_angle_bracket_and_ampersand_it_did_not_write(markdown: str) -> None:
    out = markdown_to_mrkdwn(markdown)
    without_links = re.sub(r"<https?://[^<>|\s]*\|[^<>]*>", "", out)
    assert "<" not in without_links and ">" not in re.sub(r"(?m)^>", "", without_links)
    assert re.sub(r"&(amp|lt|gt);", "", out).count("&") == 0
    assert len(re.findall(r"(?m)^```", out)) % 2 == 0, "a fence block left open"
