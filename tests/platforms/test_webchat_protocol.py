"""The /ws protocol's happy path against a real Gateway, real SQLite file and real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from support.web_harness import StartGateway, WebClient, of_type, web_config

Connect = Callable[[int], Awaitable[WebClient]]


async def test_message_is_acked_then_streamed_as_prefix_drafts_then_answered_with_echo_final(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    # 40 ms between 6-char chunks: the turn lasts long enough for several drafts.
    gateway = await start_gateway(web_config(agent={"echo": {"chunk_delay_ms": 40}}))
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-happy", "alice", user_name="Alice")

    text = "the quick brown fox jumps over the lazy dog"
    frames = await client.ask("m1", text)

    assert frames[0] == {"type": "ack", "id": "m1", "duplicate": False}
    final = frames[-1]
    assert final["type"] == "final"
    assert final["text"] == f"echo: {text}"
    assert final["in_reply_to"] == "m1"
    assert isinstance(final["message_id"], str) and final["message_id"]
    middle = frames[1:-1]
    assert middle, "no draft was streamed before the final"
    assert all(f["type"] == "draft" for f in middle), middle
    for draft in middle:
        assert draft["in_reply_to"] == "m1"
        assert final["text"].startswith(draft["text"]), draft
    assert len(middle[0]["text"]) < len(final["text"]), "the first draft must be a partial reply"
    lengths = [len(d["text"]) for d in middle]
    assert lengths == sorted(lengths), "drafts must only grow"


async def test_confirmed_finals_are_not_resent_after_reconnect(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    first = await connect_client(gateway.port)
    await first.hello("chat-confirm")
    finals = []
    for i in range(3):
        final = (await first.ask(f"m{i}", f"hello {i}"))[-1]
        await first.send({"type": "received", "message_id": final["message_id"]})
        finals.append(final)
    # The server handles one socket's frames in order: once the probe is answered, every
    # "received" before it has been committed.
    assert of_type(await first.sync(), "error") == []
    await first.close()

    second = await connect_client(gateway.port)
    await second.hello("chat-confirm")
    assert await second.sync() == [], "confirmed finals came back after reconnecting"


async def test_unconfirmed_finals_are_resent_in_order_after_ready_on_reconnect(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    first = await connect_client(gateway.port)
    await first.hello("chat-resend")
    finals = [(await first.ask(f"m{i}", f"number {i}"))[-1] for i in range(4)]
    await first.close()  # closed without confirming any of them

    second = await connect_client(gateway.port)
    await second.hello("chat-resend")  # asserts "ready" comes first
    backlog = await second.sync()
    assert backlog == finals, "the unconfirmed finals must follow ready, once each, in order"

    # Confirming on the new socket ends the resending.
    for final in finals:
        await second.send({"type": "received", "message_id": final["message_id"]})
    assert of_type(await second.sync(), "error") == []
    await second.close()
    third = await connect_client(gateway.port)
    await third.hello("chat-resend")
    assert await third.sync() == []


async def test_only_unconfirmed_finals_are_resent_when_some_were_confirmed(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    first = await connect_client(gateway.port)
    await first.hello("chat-partial")
    finals = [(await first.ask(f"m{i}", f"item {i}"))[-1] for i in range(3)]
    await first.send({"type": "received", "message_id": finals[1]["message_id"]})
    await first.sync()
    await first.close()

    second = await connect_client(gateway.port)
    await second.hello("chat-partial")
    assert await second.sync() == [finals[0], finals[2]]


async def test_resent_message_id_is_acked_as_duplicate_and_never_answered_twice(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-dup")
    first = await client.ask("same-id", "only once please")
    assert first[0] == {"type": "ack", "id": "same-id", "duplicate": False}

    # The resend carries the same id (even with different text: dedupe is by id, not content).
    await client.message("same-id", "only once please")
    await client.message("same-id", "changed text, same id")
    # A later message in the same session: turns run in admission order, so a second turn for
    # "same-id" would have to deliver its final before this one.
    after = await client.ask("later", "the next message")
    acks = of_type(after, "ack")
    assert acks == [
        {"type": "ack", "id": "same-id", "duplicate": True},
        {"type": "ack", "id": "same-id", "duplicate": True},
        {"type": "ack", "id": "later", "duplicate": False},
    ]
    assert [f for f in after if f.get("in_reply_to") == "same-id"] == [], "a duplicate was answered again"
    assert after[-1]["text"] == "echo: the next message"


async def test_identical_text_with_distinct_ids_is_answered_twice(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-twins")
    a = await client.ask("a", "same words")
    b = await client.ask("b", "same words")
    assert a[0]["duplicate"] is False and b[0]["duplicate"] is False
    assert a[-1]["text"] == b[-1]["text"] == "echo: same words"
    assert a[-1]["message_id"] != b[-1]["message_id"]


async def test_two_chats_get_only_their_own_replies(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    alice = await connect_client(gateway.port)
    bob = await connect_client(gateway.port)
    await alice.hello("chat-alice", "alice")
    await bob.hello("chat-bob", "bob")
    await alice.message("x", "for alice")
    await bob.message("x", "for bob")  # the same client id in another chat is another message
    alice_frames = await alice.until_final("x")
    bob_frames = await bob.until_final("x")
    assert alice_frames[0] == bob_frames[0] == {"type": "ack", "id": "x", "duplicate": False}
    assert alice_frames[-1]["text"] == "echo: for alice"
    assert bob_frames[-1]["text"] == "echo: for bob"
    assert all("for bob" not in f.get("text", "") for f in alice_frames + await alice.sync())
    assert all("for alice" not in f.get("text", "") for f in bob_frames + await bob.sync())


async def test_the_ack_comes_first_even_when_the_reply_is_ready_before_the_title_is_written(
    start_gateway: StartGateway, connect_client: Connect, tmp_path: Path
) -> None:
    """A chat's first message is titled before it is acked (the page reloads its list on an
    ack), and the turn runs meanwhile. The title's write here finishes only once the reply is
    recorded (a slow disk under that one write), so its drafts and final exist before the ack
    could be queued; they still come after it (found by the suite: ``draft`` ahead of ``ack``)."""
    from chatgate.store.sqlite import SqliteStore

    class SlowTitleStore(SqliteStore):
        async def set_chat_title(self, platform: str, chat_id: str, title: str, *, replace: bool) -> bool:
            deadline = asyncio.get_running_loop().time() + 20
            while not await self.unconfirmed_page(platform, chat_id, 0, 1):
                assert asyncio.get_running_loop().time() < deadline, "the reply was never recorded"
                await asyncio.sleep(0.01)
            return await super().set_chat_title(platform, chat_id, title, replace=replace)

    gateway = await start_gateway(store=SlowTitleStore(tmp_path / "chatgate.db"))
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-slow-title", "alice")
    frames = await client.ask("m1", "first words")
    assert frames[0] == {"type": "ack", "id": "m1", "duplicate": False}, frames
    assert frames[-1]["text"] == "echo: first words"
    assert await client.sync() == []
