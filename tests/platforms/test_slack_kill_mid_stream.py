"""A real ``chatgate run`` on Socket Mode, SIGKILLed while its reply streams natively on Slack.

The killed process leaves a stream open (Slack would show it growing forever). The next
process does not know that stream; it takes the recorded preview over as the resume notice
like any preview: the stream is closed the way Slack closes streams, ``chat.stopStream``
where it stands, and then becomes the notice (``chat.update``). The re-answer follows as one sealed
stream, and no message is left streaming.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from slack_fake import FakeSlack, message_event
from slack_fake.gateway import ENV, echo_of, slack_values

from support.procs import GatewayProcess, wait_until

pytestmark = pytest.mark.slow
RESUME_NOTICE = "The gateway restarted while answering this message"
THREAD = "1700000000.000200"


@pytest.mark.timeout(200)
async def test_a_kill_mid_stream_leaves_no_open_stream_and_the_notice_comes_first(
    fake_slack: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    values = slack_values(fake_slack, tmp_path, agent={"echo": {"chunk_delay_ms": 120, "chunk_chars": 2}})
    values.pop("http")
    gateway = GatewayProcess(tmp_path, values)
    text = "a long question whose answer streams for several seconds, " * 2
    await gateway.start()
    try:
        await fake_slack.wait_for(fake_slack.socket.connected.is_set, timeout=60, what="the socket")
        await fake_slack.push_event(message_event("D1", "U1", text, thread_ts=THREAD))
        await fake_slack.wait_for(lambda: fake_slack.calls_of("chat.appendStream"), 90, "a streamed frame")
        [stale] = fake_slack.view("D1")
        assert stale.streaming
        await wait_until(lambda: gateway.recorded_preview() == stale.ts, 30, "the record")
        await gateway.kill()
        killed_at = len(fake_slack.calls)
        await gateway.start()
        await fake_slack.wait_for(
            lambda: any(m.text == echo_of(text) and not m.streaming for m in fake_slack.view("D1")),
            90,
            "the re-answer",
        )
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
    shown = fake_slack.view("D1")
    assert not any(m.streaming for m in shown), [(m.ts, m.text) for m in shown]
    assert stale.text.startswith(RESUME_NOTICE), "the killed process's stream became the notice"
    answers = [m for m in shown if m.text == echo_of(text)]
    assert len(answers) == 1 and shown.index(answers[0]) > shown.index(stale)
    assert all(m.thread_ts == THREAD for m in shown) and len(shown) == 2, [(m.ts, m.text) for m in shown]
    # Issue 33, item 4: the orphan is closed the way Slack closes streams, chat.stopStream where
    # it stands (no chat.update tried on a message still streaming), then updated to the notice.
    takeover = [c for c in fake_slack.calls[killed_at:] if c.params.get("ts") == stale.ts]
    assert [c.method for c in takeover] == ["chat.stopStream", "chat.update"], takeover
    assert not takeover[0].params.get("markdown_text")
    # The re-answer is one stream, sealed once, with exactly the final text.
    answer_calls = [c for c in fake_slack.calls if c.params.get("ts") == answers[0].ts]
    assert [c.method for c in answer_calls].count("chat.stopStream") == 1
    assert "chat.update" not in [c.method for c in answer_calls]
