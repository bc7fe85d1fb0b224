"""Replies follow a web client that moves between the processes of a fleet on one PostgreSQL.

The client sends five messages on process A (each acked: admitted), closes its socket and
says hello on process B while A's turns are still running. Every reply reaches it on B within
seconds, once each and in order: those committed before the move come with B's backlog, and
those committed after it are delivered by B (the hello moved the chat's route there). Before
the move was recorded, later replies stayed addressed to A, which has no socket for the chat
and retried them a minute later.

Two topologies: A stays alive; and with three processes, A is SIGKILLed as the client moves,
so its running turn is taken over by B or C.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.postgres import DSN, pg_schema_fixture, sql  # noqa: F401  (the pg_schema fixture)
from support.procs import FrameClient, start_fleet, stop_fleet

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
MESSAGES = 5
FOLLOW_SECONDS = 20.0
"""How long the moved client waits for every reply: the turns take ~1 s each, run one after
another, so well under 10 s when replies follow the client; a reply left addressed to the old
process waits 60 s (its retry) and misses this."""


def _config(schema: str) -> dict[str, Any]:
    return {
        "store": {"url": DSN, "postgres": {"schema": schema, "pool_size": 3}},
        # ~1 s per reply: the turns are still running when the client moves
        "agent": {"echo": {"chunk_delay_ms": 150, "chunk_chars": 4}},
        "shutdown": {"drain_seconds": 1},
    }


async def _send_on(port: int, chat: str) -> list[str]:
    """Five acked messages on ``port``; the socket closes as soon as the last is acked."""
    client = FrameClient(port, chat, "u-" + chat)
    await client.connect()
    ids = [f"m{i}" for i in range(MESSAGES)]
    for mid in ids:
        await client.message(mid, f"message {mid} here")
        await client.wait_for(lambda f, mid=mid: f["type"] == "ack" and f["id"] == mid, what=f"ack {mid}")
    await client.close()
    return ids


async def _every_final(client: FrameClient, ids: list[str]) -> None:
    for mid in ids:
        await client.final(mid, timeout=FOLLOW_SECONDS)
    finals = [f for f in client.frames if f["type"] == "final"]
    order = list(dict.fromkeys(f["in_reply_to"] for f in finals))
    assert order == ids, f"replies out of order on the new process: {order}"
    for mid in ids:
        texts = {f["message_id"]: f["text"] for f in finals if f["in_reply_to"] == mid}
        assert list(texts.values()) == [f"echo: message {mid} here"], (mid, texts)


async def _outbox_of(schema: str, chat: str) -> list[tuple[str, str]]:
    rows = await sql(
        f"SELECT in_reply_to, status FROM \"{schema}\".outbox WHERE chat_id = $1 AND kind = 'final'"
        " ORDER BY id",
        chat,
    )
    return [(str(r["in_reply_to"]), str(r["status"])) for r in rows]


async def test_replies_follow_a_client_to_another_live_process(tmp_path: Path, pg_schema: str) -> None:
    fleet = await start_fleet(tmp_path, _config(pg_schema), 2)
    try:
        ids = await _send_on(fleet[0].port, "moving")
        moved = FrameClient(fleet[1].port, "moving", "u-moving")
        await moved.connect()
        await _every_final(moved, ids)
        await moved.close()
        recorded = await _outbox_of(pg_schema, "moving")
        assert [mid for mid, _ in recorded] == ids, "one final per message"
    finally:
        await stop_fleet(fleet)


async def test_replies_follow_a_client_when_the_process_it_left_is_killed(
    tmp_path: Path, pg_schema: str
) -> None:
    fleet = await start_fleet(tmp_path, _config(pg_schema), 3)
    try:
        ids = await _send_on(fleet[0].port, "orphaned")
        await fleet[0].kill()  # mid-turn: B or C takes the session over
        moved = FrameClient(fleet[1].port, "orphaned", "u-orphaned")
        await moved.connect()
        await _every_final(moved, ids)
        await moved.close()
        recorded = await _outbox_of(pg_schema, "orphaned")
        assert [mid for mid, _ in recorded] == ids, "one final per message"
    finally:
        await stop_fleet(fleet)
