"""A real ``chatgate run`` on the Bot API double, SIGKILLed while a reply is streaming.

The killed process leaves a preview (text with the cursor) in the chat. The next start
takes that message over: it becomes the "restarted while answering" notice, the re-answer
follows it as one message, and no cursor stays in the chat.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from telegram_double import TOKEN, TOKEN_ENV, BotApiDouble, User, echo_of, private

from support.procs import GatewayProcess, wait_until

pytestmark = pytest.mark.slow
CURSOR = "▍"
RESUME_NOTICE = "The gateway restarted while answering this message"


@pytest.mark.timeout(200)  # two Telegram-enabled starts (each imports the Bot API client)
async def test_a_kill_mid_stream_leaves_no_preview_behind_and_the_notice_comes_first(
    double: BotApiDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    user = User(4400, "Ada")
    chat = private(user)
    config = {
        "agent": {"echo": {"chunk_delay_ms": 120, "chunk_chars": 2}},
        "platforms": {
            "web": {"enabled": False},
            "telegram": {
                "enabled": True,
                "token_env": TOKEN_ENV,
                "allow_users": [str(user.id)],
                "api_base": double.base,
                "poll_timeout_seconds": 5,
            },
        },
        "locks": {"credential_dir": str(tmp_path / "locks")},
    }
    gateway = GatewayProcess(tmp_path, config)
    text = "a long question whose answer streams for several seconds, " * 2
    await gateway.start()
    try:
        _, asked = await double.push_message(chat, user, text)
        await double.wait_for(
            lambda: any(m.text.endswith(CURSOR) for m in double.view(chat.id)), 90, "a streamed preview"
        )
        (stale,) = [m for m in double.view(chat.id) if m.text.endswith(CURSOR)]
        # The id is committed a moment after Telegram answered the send (a kill in between is
        # the one window left: that preview is not known to the next process).
        await wait_until(lambda: gateway.recorded_preview() == str(stale.message_id), 30, "the record")
        await gateway.kill()
        await gateway.start()
        await double.wait_for(
            lambda: any(m.text == echo_of(text) for m in double.view(chat.id)), 90, "the re-answer"
        )
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
    shown = double.view(chat.id)
    assert not any(m.text.endswith(CURSOR) for m in shown), [m.text for m in shown]
    assert [m.message_id for m in shown if m.text.startswith(RESUME_NOTICE)] == [stale.message_id], (
        "the killed process's preview became the notice",
        [(m.message_id, m.text) for m in shown],
    )
    answers = [m for m in shown if m.text == echo_of(text)]
    assert len(answers) == 1 and answers[0].message_id > stale.message_id, [
        (m.message_id, m.text) for m in shown
    ]
    assert all(m.reply_to == asked for m in shown), [(m.message_id, m.reply_to) for m in shown]
    assert len(shown) == 2, [(m.message_id, m.text) for m in shown]
