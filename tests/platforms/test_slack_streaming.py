"""Slack's native streaming against the fake ("the stream is the message").

Field-note invariants shown here (../shared/reference/locks-approvals-streaming-delivery.md):
LC-10 one user-visible message per turn; LC-13 no frame carries a cursor; LC-14 frames are
prefix-stable (each append only adds); SC-09 / LC-15 the seal carries the true final; LC-19 a
seal Slack refuses falls back to a plain message, an ambiguous one is retried, and the final
is never lost; LC-33 a turn that dies mid-stream is sealed with what was delivered. Where the
workspace has no streaming, or a DM has no thread to stream in, previews are edits as before.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from slack_fake import BOT_USER, FakeSlack, block_action, message_event
from slack_fake.gateway import ENV, echo_of, slack_config
from telegram_double import Gateways

from agents.fake_openai_server import API_KEY, CallTools, FakeOpenAIServer, Reply, ScriptedCall
from chatgate.domain.outbound import PREVIEW_CURSOR

SLOW = {"echo": {"chunk_delay_ms": 100, "chunk_chars": 3}}
TEXT = "a reply that streams for a few seconds, long enough for several frames to go out"
THREAD = "1700000000.000100"


@pytest.fixture(autouse=True)
def _tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


def _frames(fake: FakeSlack, channel: str) -> list[str]:
    """The markdown of every stream call to ``channel``, in order (start, appends, stop)."""
    methods = ("chat.startStream", "chat.appendStream", "chat.stopStream")
    return [
        str(c.params.get("markdown_text") or "")
        for c in fake.calls
        if c.method in methods and c.params.get("channel") == channel and c.status == 200
    ]


async def test_a_turn_is_one_streamed_message_sealed_with_the_true_final(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    await gateways.start(slack_config(fake_slack, tmp_path, agent=SLOW))
    await fake_slack.socket.connected.wait()
    await fake_slack.push_event(message_event("D1", "U1", TEXT, thread_ts=THREAD))
    await fake_slack.wait_for(lambda: fake_slack.calls_of("chat.stopStream"), timeout=60, what="the seal")
    [message] = fake_slack.view("D1")  # LC-10: one message
    assert message.text == echo_of(TEXT) and not message.streaming and message.thread_ts == THREAD
    frames = _frames(fake_slack, "D1")
    assert len(fake_slack.calls_of("chat.appendStream")) >= 1, "no frame after the first"
    assert all(PREVIEW_CURSOR.strip() not in f for f in frames)  # LC-13
    assert "".join(frames) == echo_of(TEXT)  # LC-14: each frame only appends; SC-09: the seal completes it
    assert not fake_slack.calls_of("chat.update") and len(fake_slack.calls_of("chat.postMessage")) == 0


async def test_a_channel_mention_streams_in_the_thread_started_on_it(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    await gateways.start(slack_config(fake_slack, tmp_path, agent=SLOW))
    await fake_slack.socket.connected.wait()
    body = message_event("C1", "U1", f"<@{BOT_USER}> {TEXT}", channel_type="channel")
    await fake_slack.push_event(body)
    await fake_slack.wait_for(lambda: fake_slack.calls_of("chat.stopStream"), timeout=60, what="the seal")
    [message] = fake_slack.view("C1")
    assert message.thread_ts == body["event"]["ts"] and message.text == echo_of(TEXT)


async def test_a_seal_slack_refuses_falls_back_to_a_plain_message_and_the_final_is_not_lost(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    await gateways.start(slack_config(fake_slack, tmp_path, agent=SLOW))
    await fake_slack.socket.connected.wait()
    fake_slack.fail("chat.stopStream", "invalid_arguments")
    await fake_slack.push_event(message_event("D2", "U1", TEXT, thread_ts=THREAD))
    await fake_slack.wait_for(
        lambda: [m.text for m in fake_slack.view("D2")] == [echo_of(TEXT)], timeout=60, what="the plain final"
    )
    [message] = fake_slack.view("D2")
    assert not message.streaming and message.thread_ts == THREAD
    assert len(fake_slack.calls_of("chat.delete")) == 1, "the refused stream was not taken away"


async def test_an_ambiguous_seal_is_retried_and_ends_with_exactly_the_final(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    await gateways.start(slack_config(fake_slack, tmp_path, agent=SLOW))
    await fake_slack.socket.connected.wait()
    fake_slack.fail("chat.stopStream", "internal_error")
    await fake_slack.push_event(message_event("D3", "U1", TEXT, thread_ts=THREAD))
    await fake_slack.wait_for(
        lambda: len(fake_slack.calls_of("chat.stopStream")) >= 2, timeout=60, what="retry"
    )
    await fake_slack.wait_for(lambda: not fake_slack.view("D3")[0].streaming, what="the seal")
    assert [m.text for m in fake_slack.view("D3")] == [echo_of(TEXT)]


async def test_a_turn_stopped_mid_stream_is_sealed_with_what_was_delivered(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    agent = {"echo": {"chunk_delay_ms": 200, "chunk_chars": 2}}
    await gateways.start(slack_config(fake_slack, tmp_path, agent=agent))
    await fake_slack.socket.connected.wait()
    await fake_slack.push_event(message_event("D4", "U1", TEXT * 3, thread_ts=THREAD))
    await fake_slack.wait_for(lambda: fake_slack.calls_of("chat.appendStream"), timeout=60, what="streaming")
    await fake_slack.push_event(message_event("D4", "U1", "/stop", thread_ts=THREAD))
    await fake_slack.wait_for(lambda: fake_slack.calls_of("chat.stopStream"), timeout=60, what="the seal")
    await fake_slack.wait_for(lambda: len(fake_slack.view("D4")) >= 2, what="the /stop reply")
    stream = fake_slack.view("D4")[0]
    assert not stream.streaming and stream.text.endswith("(stopped)")
    delivered = "".join(_frames(fake_slack, "D4")[:-1])
    assert stream.text.startswith(delivered) and echo_of(TEXT * 3).startswith(delivered)
    assert echo_of(TEXT * 3) not in stream.text, "the stopped turn's full reply went out"


async def test_without_streaming_in_the_workspace_previews_are_edits_with_a_cursor(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    fake_slack.streaming = False
    gateway = await gateways.start(slack_config(fake_slack, tmp_path, agent=SLOW))
    await fake_slack.socket.connected.wait()
    for n, channel in enumerate(("D5", "D6")):
        await fake_slack.push_event(message_event(channel, "U1", f"{TEXT} {n}", thread_ts=THREAD))
        await fake_slack.wait_for(
            lambda c=channel, n=n: [m.text for m in fake_slack.view(c)] == [echo_of(f"{TEXT} {n}")],
            timeout=60,
            what="the final",
        )
    assert len(fake_slack.calls_of("chat.startStream")) == 1, "asked again after Slack said it has none"
    posts = [c.params["text"] for c in fake_slack.calls_of("chat.postMessage")]
    assert posts and all(p.endswith(PREVIEW_CURSOR) for p in posts)
    assert not gateway.adapters["slack"].capabilities.native_stream


async def test_a_turn_across_a_tool_call_and_its_approval_is_still_one_streamed_message(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LC-10 across a tool boundary: the openai agent (the real SDK, against a local fake model)
    writes, calls a tool that waits for a Block Kit approval, and writes on; the reply is one
    stream sealed with the final, and the prompt is a message of its own (APPR-14)."""
    server = FakeOpenAIServer()
    server.start()
    monkeypatch.setenv("FAKE_OPENAI_KEY", API_KEY)
    workdir = tmp_path / "work"
    (workdir / "x").mkdir(parents=True)
    rm_x = ScriptedCall("shell", json.dumps({"command": "rm -rf ./x"}), call_id="call_rm")
    server.script(
        CallTools((rm_x,), text="Let me clean that up. ", text_chunks=4),
        Reply("Done: the directory is gone, and nothing else was touched.", chunks=12),
    )
    agent = {
        "kind": "openai",
        "openai": {"base_url": server.base_url, "model": "m", "api_key_env": "FAKE_OPENAI_KEY"},
    }
    config = slack_config(fake_slack, tmp_path, agent=agent, tools={"enabled": True, "workdir": str(workdir)})
    try:
        await gateways.start(config)
        await fake_slack.socket.connected.wait()
        await fake_slack.push_event(message_event("D7", "U1", "please clean up x", thread_ts=THREAD))
        await fake_slack.wait_for(
            lambda: any(m.blocks for m in fake_slack.view("D7")), timeout=60, what="prompt"
        )
        prompt = next(m for m in fake_slack.view("D7") if m.blocks)
        once = next(
            e["value"]
            for b in prompt.blocks or []
            if b["type"] == "actions"
            for e in b["elements"]
            if e["value"].endswith(":once")
        )
        await asyncio.sleep(1.5)  # past the preview interval, so the text after the tool streams
        await fake_slack.push_interactive(block_action("D7", "U1", prompt.ts, once))
        await fake_slack.wait_for(lambda: fake_slack.calls_of("chat.stopStream"), timeout=60, what="the seal")
    finally:
        server.stop()
    replies = [m for m in fake_slack.view("D7") if m is not prompt]
    assert len(replies) == 1 and not replies[0].streaming
    assert replies[0].text.endswith("nothing else was touched.") and not (workdir / "x").exists()
    [started] = [c for c in fake_slack.calls_of("chat.startStream") if c.params.get("channel") == "D7"]
    assert PREVIEW_CURSOR.strip() not in str(started.params.get("markdown_text"))
