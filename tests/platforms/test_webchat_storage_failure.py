"""A storage failure at admission, seen through the real socket: loud, never acked, nothing lost.

The seam is the store's sqlite3 connection factory: real SQLite connections whose authorizer
refuses INSERT INTO inbox while the test holds the switch closed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from chatgate.store.sqlite import SqliteStore
from support.web_harness import InboxInsertSwitch, StartGateway, WebClient, of_type, web_config

Connect = Callable[[int], Awaitable[WebClient]]


async def test_inbox_write_failure_gets_storage_error_without_ack_and_resend_is_answered_once(
    tmp_path: Path, start_gateway: StartGateway, connect_client: Connect
) -> None:
    switch = InboxInsertSwitch()
    store = SqliteStore(tmp_path / "chatgate.db", connect=switch.connect)
    # 150 ms per 6-char chunk (~1.6 s): "before"'s turn is still streaming while admission is
    # failing, including the intake's brief retries (engine.ports.WAIT_BRIEFLY) of each message.
    gateway = await start_gateway(web_config(agent={"echo": {"chunk_delay_ms": 150}}), store=store)
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-storage", "alice")
    bystander = await connect_client(gateway.port)
    await bystander.hello("chat-bystander", "bob")

    before_text = "admitted before the outage, and long enough to still be streaming"
    await client.message("before", before_text)
    ack = await client.until(lambda f: f.get("type") == "ack")
    assert ack[-1] == {"type": "ack", "id": "before", "duplicate": False}

    switch.block()
    await client.message("lost?", "written during the outage")
    await client.message("cmd", "/status")  # control commands are committed too, so they fail the same way
    await bystander.message("b-lost?", "another chat during the outage")
    frames = await client.sync()
    errors = of_type(frames, "error")
    assert [(e["code"], e["id"]) for e in errors] == [
        ("storage_unavailable", "lost?"),
        ("storage_unavailable", "cmd"),
    ]
    assert all(e["message"] for e in errors)
    assert of_type(frames, "ack") == [], "a message that was not committed must not be acked"
    b_frames = await bystander.sync()
    assert [(f["type"], f.get("code"), f.get("id")) for f in b_frames] == [
        ("error", "storage_unavailable", "b-lost?")
    ]
    assert switch.denied >= 3, "the failure was not injected by SQLite"

    # What was admitted before the outage is still answered, while the outage lasts.
    rest = await client.until_final("before")
    assert rest[-1]["text"] == f"echo: {before_text}"
    assert of_type(rest, "ack") == []

    switch.unblock()
    # The client resends what was refused: now it is committed, acked as new, and answered once.
    resent = await client.ask("lost?", "written during the outage")
    assert resent[0] == {"type": "ack", "id": "lost?", "duplicate": False}
    assert resent[-1]["text"] == "echo: written during the outage"
    status = await client.ask("cmd", "/status")
    assert status[0] == {"type": "ack", "id": "cmd", "duplicate": False}
    assert status[-1]["text"].startswith("Session agent:")
    b_resent = await bystander.ask("b-lost?", "another chat during the outage")
    assert b_resent[0]["duplicate"] is False
    assert b_resent[-1]["text"] == "echo: another chat during the outage"

    # Exactly once: a later message in the same session is answered with no second "lost?" reply first.
    after = await client.ask("after", "after the outage")
    assert [f for f in after if f.get("in_reply_to") in ("lost?", "before")] == []
    assert after[-1]["text"] == "echo: after the outage"
    # And the gateway never answered "lost?" more than once across a reconnect either.
    await client.close()
    again = await connect_client(gateway.port)
    await again.hello("chat-storage", "alice")
    backlog = await again.sync()
    assert [f["in_reply_to"] for f in backlog] == ["before", "lost?", "cmd", "after"]
