"""A final that is the gateway's apology for a failed turn says so (``failure``), over real sockets."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from support.web_harness import StartGateway, WebClient, web_config

Connect = Callable[[int], Awaitable[WebClient]]


async def test_a_timed_out_turn_is_a_final_with_failure_timeout(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    # 2 s per chunk against a 0.3 s turn limit: the turn times out before its first chunk.
    config = web_config(agent={"echo": {"chunk_delay_ms": 2000}, "turn_timeout_seconds": 0.3})
    gateway = await start_gateway(config)
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-failure", "alice")
    final = (await client.ask("m1", "too slow"))[-1]
    assert final["type"] == "final"
    assert final["failure"] == "timeout"
    assert final["text"].startswith("Sorry, I did not finish")


async def test_an_ordinary_final_has_no_failure_field(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-ok", "alice")
    final = (await client.ask("m1", "fine"))[-1]
    assert final == {
        "type": "final",
        "message_id": final["message_id"],
        "in_reply_to": "m1",
        "text": "echo: fine",
    }
