"""Approval prompts on Telegram: an inline keyboard of hp1 tokens, answered by a tap that is
resolved first; the prompt message then shows the recorded outcome and loses its buttons."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from telegram_double import BotApiDouble, Gateways, Sent, User, private, telegram_config

from chatgate.domain.prompts import MAX_TOKEN_BYTES, parse_prompt_token

ALMA = User(7001, "Alma")


def _prompts(double: BotApiDouble, chat_id: int) -> list[Sent]:
    return [m for m in double.view(chat_id) if m.keyboard or "Approval needed" in m.text]


def _states(db: Path) -> list[tuple[str, str | None]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT state, tier FROM approvals ORDER BY requested_at").fetchall()
    finally:
        conn.close()


async def test_an_inline_keyboard_prompt_is_answered_by_a_tap_and_a_late_tap_is_told_privately(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    (workdir / "x").mkdir(parents=True)
    config = telegram_config(
        double,
        tmp_path,
        telegram={"allow_users": [ALMA.id]},
        tools={"enabled": True, "workdir": str(workdir)},
        approvals={"timeout_seconds": 30},
    )
    gateway = await gateways.start(config)
    chat = private(ALMA)
    await double.push_message(chat, ALMA, "!sh rm -rf ./x")
    await double.wait_for(lambda: bool(_prompts(double, chat.id)), what="the prompt")
    [prompt] = _prompts(double, chat.id)
    assert prompt.keyboard is not None and "rm -rf ./x" in prompt.text
    tokens = [button["callback_data"] for row in prompt.keyboard for button in row]
    parsed = [parse_prompt_token(t) for t in tokens]
    assert all(p is not None for p in parsed) and all(len(t.encode()) <= MAX_TOKEN_BYTES for t in tokens)
    assert {p[1] for p in parsed if p} >= {"once", "deny"}
    once = next(t for t in tokens if t.endswith(":once"))
    assert (workdir / "x").exists()

    _, query = await double.push_callback(chat, ALMA, prompt.message_id, once)
    await double.wait_for(lambda: not (workdir / "x").exists(), what="the approved command to run")
    await double.wait_for(lambda: prompt.keyboard is None, what="the buttons to go")
    assert "Approved" in prompt.text and "Alma" in prompt.text
    await double.wait_for(
        lambda: any(a.get("callback_query_id") == query for a in double.callback_answers), what="the spinner"
    )
    assert _states(gateway.state_dir / "chatgate.db") == [("approved", "once")]

    _, late = await double.push_callback(chat, ALMA, prompt.message_id, once)  # a second tap on a dead prompt
    await double.wait_for(
        lambda: any(a.get("callback_query_id") == late for a in double.callback_answers),
        what="the late answer",
    )
    told = next(a for a in double.callback_answers if a.get("callback_query_id") == late)
    assert told.get("text"), told  # the tapper is told why nothing happened; the record is unchanged
    assert _states(gateway.state_dir / "chatgate.db") == [("approved", "once")]
