"""Telegram flood control: a 429 holds back only the chat it names, for as long as it says."""

from __future__ import annotations

from pathlib import Path

from telegram_double import BotApiDouble, Gateways, User, echo_of, private, telegram_config

A, B, C = User(5001, "Ann"), User(5002, "Bob"), User(5003, "Cyd")
RETRY_AFTER = 4


async def test_a_429_delays_only_its_chat_which_resumes_after_retry_after(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    users = [u.id for u in (A, B, C)]
    await gateways.start(telegram_config(double, tmp_path, telegram={"allow_users": users}))
    flood = double.flood(A.id, RETRY_AFTER)
    await double.push_message(private(A), A, "a1")
    await double.wait_for(lambda: bool(flood.hits), what="the 429 for chat A")
    await double.push_message(private(A), A, "a2")
    await double.push_message(private(B), B, "b1")
    await double.push_message(private(C), C, "c1")

    await double.wait_for(lambda: len(double.view(B.id)) == 1 and len(double.view(C.id)) == 1)
    for other in (B, C):
        reply = double.view(other.id)[0]
        assert reply.at < flood.until, f"chat {other.id} waited for chat A's flood penalty"
    assert double.view(A.id) == [], "chat A got a message during its penalty"

    await double.wait_for(lambda: len(double.view(A.id)) == 2, timeout=RETRY_AFTER + 30)
    shown = double.view(A.id)
    assert [m.text for m in shown] == [echo_of("a1"), echo_of("a2")]
    assert shown[0].at >= flood.until
    assert flood.violations == 0, f"{flood.violations} call(s) to chat A during its penalty"
    assert len(flood.hits) == 1
