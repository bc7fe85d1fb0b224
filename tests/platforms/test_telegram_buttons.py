"""Buttons (callback queries) and bot commands on Telegram."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from telegram_double import (
    BOT_ID,
    BOT_USERNAME,
    BotApiDouble,
    Chat,
    Gateways,
    User,
    echo_of,
    private,
    telegram_config,
)

from chatgate.domain.commands import CONTROL_COMMANDS, help_text
from chatgate.platforms.telegram.adapter import REFUSED_TEXT

ALLOWED = User(7001, "Alma")
STRANGER = User(7999, "Mallory")
GROUP = Chat(-1005000000001, "supergroup", title="Team")


def _inbox_row(db: Path, update_id: int) -> dict[str, Any] | None:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute(
            "SELECT inbound_json FROM inbox WHERE transport = 'telegram' AND delivery_id = ?",
            (f"{BOT_ID}:{update_id}",),
        ).fetchone()
    finally:
        conn.close()
    return json.loads(row[0]) if row else None


async def test_a_button_press_is_admitted_as_a_button_event_and_its_spinner_stopped_after_commit(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    gateway = await gateways.start(telegram_config(double, tmp_path, telegram={"allow_users": [ALLOWED.id]}))
    db = gateway.state_dir / "chatgate.db"
    committed_when_answered: list[bool] = []
    pending: dict[str, int] = {}

    def on_answer(params: dict[str, Any]) -> None:
        update_id = pending[params["callback_query_id"]]
        committed_when_answered.append(_inbox_row(db, update_id) is not None)

    double.on_callback_answer = on_answer
    menu_id = 41  # a message with buttons the bot sent earlier
    pending["cbq-yes"] = double.next_update_id
    update_id, _ = await double.push_callback(GROUP, ALLOWED, menu_id, "choice:yes", query_id="cbq-yes")
    await double.wait_for(lambda: len(double.callback_answers) == 1)

    assert double.callback_answers[0]["callback_query_id"] == "cbq-yes"
    assert "text" not in double.callback_answers[0], "an allowed press must not show a refusal"
    assert committed_when_answered == [True], "the spinner was stopped before the press was committed"
    event = _inbox_row(db, update_id)
    assert event is not None
    assert event["kind"] == "button"
    assert event["action_id"] == "cbq-yes"
    assert event["message_ref"] == str(menu_id)
    assert event["text"] == "choice:yes"
    assert event["payload"]["data"] == "choice:yes"
    assert event["source"]["chat_id"] == str(GROUP.id) and event["source"]["user_id"] == str(ALLOWED.id)
    await double.wait_for(lambda: len(double.view(GROUP.id)) == 1)
    reply = double.view(GROUP.id)[0]
    assert reply.text == echo_of("choice:yes") and reply.reply_to == menu_id
    keys = [s.session_key for s in await gateway.store.list_sessions()]
    assert keys == [f"agent:main:telegram:group:{GROUP.id}:{ALLOWED.id}"], "not the text lane's session"


async def test_a_button_press_from_a_user_not_on_the_allowlist_is_refused_and_nothing_is_admitted(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    gateway = await gateways.start(telegram_config(double, tmp_path, telegram={"allow_users": [ALLOWED.id]}))
    update_id, _ = await double.push_callback(GROUP, STRANGER, 1, "choice:no", query_id="cbq-no")
    await double.wait_for(lambda: len(double.callback_answers) == 1)
    await double.wait_for(
        lambda: double.confirmed_below == update_id + 1, what="the refused press acknowledged"
    )

    assert double.callback_answers[0] == {"callback_query_id": "cbq-no", "text": REFUSED_TEXT}
    assert _inbox_row(gateway.state_dir / "chatgate.db", update_id) is None
    assert await gateway.store.list_sessions() == []
    assert double.all_sent() == []


async def test_a_message_from_a_user_not_on_the_allowlist_is_acknowledged_but_neither_admitted_nor_answered(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    gateway = await gateways.start(telegram_config(double, tmp_path, telegram={"allow_users": [ALLOWED.id]}))
    refused, _ = await double.push_message(private(STRANGER), STRANGER, "let me in")
    await double.push_message(private(ALLOWED), ALLOWED, "hi")
    await double.wait_for(lambda: len(double.view(ALLOWED.id)) == 1)
    await double.wait_for(lambda: double.confirmed_below == double.next_update_id)
    assert double.view(STRANGER.id) == []
    assert _inbox_row(gateway.state_dir / "chatgate.db", refused) is None


async def test_commands_are_registered_and_answered_when_addressed_to_this_bot(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    await gateways.start(telegram_config(double, tmp_path, telegram={"allow_users": [ALLOWED.id]}))
    await double.wait_for(lambda: double.commands is not None, what="setMyCommands")
    assert double.commands == [{"command": c.name, "description": c.summary} for c in CONTROL_COMMANDS]

    chat = private(ALLOWED)
    await double.push_message(chat, ALLOWED, f"/help@{BOT_USERNAME}")
    await double.push_message(chat, ALLOWED, "/help@some_other_bot")
    await double.wait_for(lambda: len(double.view(chat.id)) == 2)
    texts = sorted(m.text for m in double.view(chat.id))
    assert texts == sorted([help_text(), echo_of("/help@some_other_bot")])
