"""A real gateway process on a real 2 MiB file system: a full disk refuses clearly and heals by itself.

Every acknowledged message is answered exactly once once there is room again, with no
restart: the WAL must not wedge the store, and a session whose commit and release both
failed must not stay leased until its lease runs out.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from support.procs import ChatClient, FrameClient, GatewayProcess, wait_until
from support.smallfs import disk_hog, small_fs

pytestmark = pytest.mark.slow

CHATS = 4
PER_CHAT = 75
"""300 messages: on a 2 MiB disk the WAL used to fill it for good after about 145."""


async def test_the_wal_cannot_wedge_a_gateway_on_a_2_mib_disk(tmp_path: Path) -> None:
    with small_fs(tmp_path / "disk") as disk:
        gateway = GatewayProcess(disk, {"agent": {"echo": {"chunk_delay_ms": 0}}})
        await gateway.start()
        url = f"ws://127.0.0.1:{gateway.port}/ws"
        clients = [
            ChatClient(
                url,
                f"chat{c}",
                [(f"c{c}m{i}", f"message {i} of chat {c} " + "x" * 150) for i in range(PER_CHAT)],
            )
            for c in range(CHATS)
        ]
        stop = asyncio.Event()
        tasks = [asyncio.create_task(client.run(stop)) for client in clients]
        try:
            await wait_until(lambda: all(c.done for c in clients), 120, "every message answered")
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            running = gateway.proc is not None and gateway.proc.returncode is None
            logs = gateway.logs()
            await gateway.kill()
        assert running and gateway.starts == 1, f"the gateway needed a restart: {logs[-2000:]}"
        for client in clients:
            # One reply a message: one outbox row (one id). A copy of it may come again on a later
            # connection (the protocol re-sends an unconfirmed reply after every hello, and on a
            # full disk the confirmation itself can fail to be written), never on the same one.
            twice = {mid: finals for mid, finals in client.finals.items() if len({i for i, _ in finals}) != 1}
            assert not twice, f"{client.chat_id}: answered more than once: {twice}"
            conns = client.final_connections.items()
            resent = {mid: on for mid, on in conns if len(set(on)) != len(on)}
            assert not resent, f"{client.chat_id}: a reply sent twice on one connection: {resent}"


async def _send(client: FrameClient, mid: str) -> dict[str, Any]:
    """Send a message and return the gateway's answer to it: its ack or its error."""
    mark = client.mark()
    await client.message(mid, f"text of {mid}")
    return await client.wait_for(
        lambda f: f["type"] in ("ack", "error") and f.get("id") == mid,
        after=mark,
        timeout=60,
        what=f"an answer to {mid}",
    )


async def test_a_full_disk_refuses_with_the_reason_then_answers_every_acknowledged_message_once(
    tmp_path: Path,
) -> None:
    with small_fs(tmp_path / "disk") as disk:
        config = {
            "agent": {"echo": {"chunk_delay_ms": 30}},
            # Long enough that a lease left behind by a failed release would outlast the test.
            "scheduler": {"lease_seconds": 600},
        }
        gateway = GatewayProcess(disk, config)
        await gateway.start()
        client = FrameClient(gateway.port, "chat-1", "u1")
        try:
            await client.connect()
            acked: list[str] = []
            for i in range(5):  # their turns are still running when the disk fills
                assert (await _send(client, f"before{i}"))["type"] == "ack"
                acked.append(f"before{i}")
            refused: list[dict[str, Any]] = []
            async with disk_hog(disk / "ballast"):
                for i in range(30):
                    answer = await _send(client, f"while{i}")
                    if answer["type"] == "ack":
                        acked.append(f"while{i}")
                    else:
                        refused.append(answer)
                    if len(refused) >= 3:
                        break
            assert refused, "a full disk must refuse new messages"
            for answer in refused:
                assert answer["code"] == "storage_unavailable", answer
                assert "disk is full" in answer["message"] and "resend" in answer["message"], answer
            for answer in refused:  # space is back: the user resends what was refused
                assert (await _send(client, answer["id"]))["type"] == "ack"
                acked.append(answer["id"])
            for mid in acked:
                await client.final(mid, timeout=90)
            await _send(client, "last")  # replies of one chat arrive in order: any duplicate comes first
            await client.final("last", timeout=90)
            finals = [f["in_reply_to"] for f in client.of("final")]
            assert sorted(finals) == sorted([*acked, "last"]), finals
            assert gateway.proc is not None and gateway.proc.returncode is None
        except AssertionError as exc:  # what the gateway said is the lead: its disk is gone after the test
            raise AssertionError(f"{exc}\n--- the gateway's log ends:\n{gateway.logs()[-6000:]}") from exc
        finally:
            await client.close()
            await gateway.kill()
