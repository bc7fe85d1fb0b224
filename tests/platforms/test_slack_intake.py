"""Slack intake over Socket Mode against the fake: Bolt and slack-sdk unmodified, a real gateway.

An envelope is acknowledged only once its event is in the SQLite file; a redelivery (same
``event_id``, higher ``retry_attempt``) is acknowledged and never answered twice; an event
the store refused is not acknowledged, Slack redelivers it, and it is answered once. DMs,
channel mentions and threads get relay-contract session keys (scope = the workspace).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest
from slack_fake import BOT_USER, TEAM, FakeSlack, delete_event, edit_event, message_event, slash_command
from slack_fake.gateway import ENV, echo_of, rows, slack_config
from telegram_double import Gateways

from chatgate.store.sqlite import SqliteStore


@pytest.fixture(autouse=True)
def _tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


def _texts(fake: FakeSlack, channel: str) -> list[str]:
    return [m.text for m in fake.view(channel)]


async def test_a_dm_is_acknowledged_only_once_committed_and_answered_in_place(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    gateway = await gateways.start(slack_config(fake_slack, tmp_path))
    db = gateway.state_dir / "chatgate.db"
    committed_at_ack: list[int] = []

    def on_ack(envelope: object) -> None:
        event_id = getattr(envelope, "payload")["event_id"]  # noqa: B009
        committed_at_ack.append(len(rows(db, "SELECT 1 FROM inbox WHERE delivery_id = ?", event_id)))

    fake_slack.socket.on_ack = on_ack
    await fake_slack.socket.connected.wait()
    body = message_event("D1", "U1", "hello there")
    envelope = await fake_slack.push_event(body)
    await fake_slack.wait_for(lambda: _texts(fake_slack, "D1") == [echo_of("hello there")], what="the reply")
    assert envelope.acked_at is not None and committed_at_ack == [1]
    [reply] = fake_slack.view("D1")
    assert reply.thread_ts is None, "a DM outside a thread is answered in place"
    sql = "SELECT session_key, inbound_json FROM inbox WHERE delivery_id = ?"
    [(key, source)] = rows(db, sql, body["event_id"])
    assert key == "agent:main:slack:dm:D1"
    assert json.loads(source)["source"]["scope_id"] == TEAM


async def test_a_redelivered_envelope_is_acknowledged_again_and_answered_once(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    await gateways.start(slack_config(fake_slack, tmp_path))
    await fake_slack.socket.connected.wait()
    body = message_event("D2", "U1", "only once")
    first = await fake_slack.push_event(body)
    again = await fake_slack.push_event(body)  # Slack's retry of the same event (a new envelope)
    await fake_slack.wait_for(lambda: first.acked_at and again.acked_at, what="both acks")
    await fake_slack.wait_for(lambda: len(fake_slack.view("D2")) >= 1, what="the reply")
    later = message_event("D2", "U1", "next")
    await fake_slack.push_event(later)
    await fake_slack.wait_for(lambda: len(fake_slack.view("D2")) >= 2, what="the next reply")
    assert _texts(fake_slack, "D2") == [echo_of("only once"), echo_of("next")]


async def test_a_burst_at_a_cold_start_asks_slack_who_the_bot_is_once(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    """Bolt's default authorization called ``auth.test`` for every event until its first answer
    was cached: 12 events at once made 13 calls. The adapter's own answer now serves them all."""
    await gateways.start(slack_config(fake_slack, tmp_path))
    await fake_slack.socket.connected.wait()
    channels = [f"D{40 + i}" for i in range(12)]
    for channel in channels:
        await fake_slack.push_event(message_event(channel, "U1", f"cold {channel}"))
    await fake_slack.wait_for(
        lambda: all(_texts(fake_slack, c) == [echo_of(f"cold {c}")] for c in channels), what="12 replies"
    )
    assert len(fake_slack.calls_of("auth.test")) == 1


class InboxSwitch:
    """sqlite3 connections that refuse INSERT INTO inbox while blocked (the storage seam)."""

    def __init__(self) -> None:
        self.blocked = threading.Event()
        self.denied = 0

    def connect(self, path: str) -> sqlite3.Connection:
        conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=30.0, cached_statements=0
        )
        conn.set_authorizer(self._authorize)
        return conn

    def _authorize(self, action: int, arg1: str | None, *_: str | None) -> int:
        if action == sqlite3.SQLITE_INSERT and arg1 == "inbox" and self.blocked.is_set():
            self.denied += 1
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK


async def test_an_event_the_store_refused_is_not_acknowledged_and_its_redelivery_is_answered_once(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    switch = InboxSwitch()
    store = SqliteStore(tmp_path / "state" / "chatgate.db", connect=switch.connect)
    await gateways.start(slack_config(fake_slack, tmp_path), store=store)
    await fake_slack.socket.connected.wait()
    fake_slack.socket.redeliver_after = 1.0
    switch.blocked.set()
    envelope = await fake_slack.push_event(message_event("D3", "U1", "while the disk refuses"))
    await fake_slack.wait_for(lambda: envelope.attempts >= 2 and switch.denied >= 2, what="redeliveries")
    assert envelope.acked_at is None, "an event that was not committed was acknowledged"
    switch.blocked.clear()
    await fake_slack.wait_for(lambda: envelope.acked_at is not None, what="the ack after recovery")
    await fake_slack.wait_for(lambda: len(fake_slack.view("D3")) >= 1, what="the reply")
    await fake_slack.wait_for(lambda: not fake_slack.socket.unacked(), what="every copy acked")
    assert _texts(fake_slack, "D3") == [echo_of("while the disk refuses")]


async def test_channels_answer_mentions_in_a_thread_and_threads_are_their_own_session(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    gateway = await gateways.start(slack_config(fake_slack, tmp_path))
    db = gateway.state_dir / "chatgate.db"
    await fake_slack.socket.connected.wait()
    quiet = await fake_slack.push_event(message_event("C1", "U1", "just chatting", channel_type="channel"))
    mention = message_event("C1", "U1", f"<@{BOT_USER}> hi bot", channel_type="channel")
    await fake_slack.push_event(mention)
    await fake_slack.wait_for(lambda: len(fake_slack.view("C1")) >= 1, what="the mention's reply")
    [reply] = fake_slack.view("C1")
    assert reply.text == echo_of("hi bot") and reply.thread_ts == mention["event"]["ts"]
    assert quiet.acked_at is not None
    in_thread = message_event(
        "C1", "U2", f"<@{BOT_USER}> and here", channel_type="channel", thread_ts=mention["event"]["ts"]
    )
    await fake_slack.push_event(in_thread)
    await fake_slack.wait_for(lambda: len(fake_slack.view("C1")) >= 2, what="the thread reply")
    assert fake_slack.view("C1")[1].thread_ts == mention["event"]["ts"]
    keys = [k for (k,) in rows(db, "SELECT session_key FROM inbox ORDER BY seq")]
    assert keys == ["agent:main:slack:group:C1:U1", f"agent:main:slack:group:C1:{mention['event']['ts']}"]
    assert len(rows(db, "SELECT 1 FROM inbox WHERE delivery_id = ?", quiet.payload["event_id"])) == 0


async def test_strangers_deletions_notices_and_the_bots_own_edits_never_become_messages(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    gateway = await gateways.start(slack_config(fake_slack, tmp_path))
    await fake_slack.socket.connected.wait()
    stranger = await fake_slack.push_event(message_event("D9", "U999", "let me in"))
    deleted = await fake_slack.push_event(delete_event("D1", "U1", "1.000001", "oops"))
    join = await fake_slack.push_event(message_event("C1", "U1", "joined", subtype="channel_join"))
    mine = await fake_slack.push_event(message_event("D1", BOT_USER, "my own reply"))
    my_edit = await fake_slack.push_event(edit_event("D1", BOT_USER, "1.000002", "echo: hi", "echo: h ▍"))
    envelopes = [stranger, deleted, join, mine, my_edit]
    await fake_slack.wait_for(lambda: all(e.acked_at for e in envelopes), what="every ack")
    rejected = await gateway.store.rejected(10)
    reasons = {r.delivery_id: r.reason for r in rejected}
    assert "unauthorized" in reasons[stranger.payload["event_id"]]
    assert "deleted" in reasons[deleted.payload["event_id"]]
    for skipped in (join, mine, my_edit):
        assert skipped.payload["event_id"] not in reasons
    assert fake_slack.bot_messages() == []


async def test_an_edit_reaches_the_agent_as_an_edit_of_its_message_never_as_a_new_one(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    """With ``busy_policy: queue`` each message is its own turn, so an edit is answered after the
    message it edits, marked as an edit (in a batch, ``interrupt``, it replaces the waiting text:
    ``tests/domain/test_edits.py``)."""
    await gateways.start(slack_config(fake_slack, tmp_path))
    await fake_slack.socket.connected.wait()
    typo = message_event("D5", "U1", "helo")
    await fake_slack.push_event(typo)
    await fake_slack.wait_for(lambda: len(fake_slack.view("D5")) >= 1, what="the first reply")
    await fake_slack.push_event(edit_event("D5", "U1", typo["event"]["ts"], "hello", "helo"))
    await fake_slack.push_event(
        edit_event("D5", "U1", typo["event"]["ts"], "hello", "hello")
    )  # unchanged text
    await fake_slack.wait_for(lambda: len(fake_slack.view("D5")) >= 2, what="the edit's reply")
    edited = f"(edited their message {typo['event']['ts']}; it now reads:) hello"
    assert [m.text for m in fake_slack.view("D5")] == [echo_of("helo"), echo_of(edited)]
    stranger_edit = await fake_slack.push_event(
        edit_event("C1", "U2", "1.0", "no mention", "still none", channel_type="channel")
    )
    await fake_slack.wait_for(lambda: stranger_edit.acked_at is not None, what="the ack")
    assert len(fake_slack.view("D5")) == 2 and not fake_slack.view("C1")


async def test_the_gateway_slash_command_is_a_control_command(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    await gateways.start(slack_config(fake_slack, tmp_path))
    await fake_slack.socket.connected.wait()
    status = await fake_slack.push_slash(slash_command("D1", "U1", "/chatgate", "status"))
    await fake_slack.wait_for(lambda: len(fake_slack.view("D1")) >= 1, what="the status reply")
    assert "agent:main:slack:dm:D1" in fake_slack.view("D1")[0].text
    assert status.acked_at is not None
    refused = await fake_slack.push_slash(slash_command("D7", "U999", "/chatgate", "help"))
    await fake_slack.wait_for(lambda: refused.acked_at is not None, what="the refusal's ack")
    assert refused.ack_payload is not None and "not allowed" in refused.ack_payload["text"]


async def test_ask_is_a_prompt_for_the_agent_and_an_empty_one_is_told_why(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    gateway = await gateways.start(slack_config(fake_slack, tmp_path))
    await fake_slack.socket.connected.wait()
    await fake_slack.push_slash(slash_command("D2", "U1", "/ask", "what is 2+2?"))
    await fake_slack.push_slash(slash_command("D2", "U1", "/chatgate", "ask and then?"))
    want = [echo_of("what is 2+2?"), echo_of("and then?")]
    await fake_slack.wait_for(lambda: _texts(fake_slack, "D2") == want, what="both answers")
    empty = await fake_slack.push_slash(slash_command("D2", "U1", "/ask", "   "))
    await fake_slack.wait_for(lambda: empty.acked_at is not None, what="the empty prompt's ack")
    assert empty.ack_payload is not None and empty.ack_payload["response_type"] == "ephemeral"
    assert "/ask needs a prompt" in empty.ack_payload["text"]
    texts = [
        json.loads(t) for (t,) in rows(gateway.state_dir / "chatgate.db", "SELECT inbound_json FROM inbox")
    ]
    assert [(t["text"], t["kind"]) for t in texts] == [("what is 2+2?", "text"), ("and then?", "text")]


async def test_after_slack_drops_the_socket_the_adapter_reconnects_and_unacked_envelopes_are_answered_once(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    gateway = await gateways.start(slack_config(fake_slack, tmp_path))
    await fake_slack.socket.connected.wait()
    fake_slack.socket.drop_acks = True
    lost = await fake_slack.push_event(message_event("D6", "U1", "before the drop"))
    await fake_slack.wait_for(lambda: fake_slack.socket.dropped_acks >= 1, what="the lost ack")
    fake_slack.socket.drop_acks = False
    await fake_slack.socket.drop_connections()  # Slack refreshes the connection
    await fake_slack.wait_for(lambda: fake_slack.socket.connects >= 2, timeout=60, what="the reconnect")
    await fake_slack.wait_for(lambda: lost.acked_at is not None, timeout=30, what="the redelivery's ack")
    assert lost.attempts >= 1
    after = await fake_slack.push_event(message_event("D6", "U1", "after the drop"))
    await fake_slack.wait_for(lambda: len(fake_slack.view("D6")) >= 2, what="both replies")
    assert [m.text for m in fake_slack.view("D6")] == [echo_of("before the drop"), echo_of("after the drop")]
    assert after.acked_at is not None and gateway.adapters["slack"].state().connected
