"""SIGKILL the gateway at random moments under load: nothing lost, nothing twice, order kept."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path

import pytest

from support.procs import ChatClient, GatewayProcess, wait_until

pytestmark = pytest.mark.slow

CHATS = 20
PER_CHAT = 10
KILLS = 3


_wait = wait_until


_DIAGNOSTIC_QUERIES = (
    "SELECT seq, session_key, status, attempts FROM inbox WHERE status != 'done'",
    "SELECT id, chat_id, kind, status, in_reply_to FROM outbox WHERE confirmed_at IS NULL",
    "SELECT key, lease_owner, retry_at, last_error FROM sessions WHERE lease_owner IS NOT NULL",
)


def _diagnose(clients: list[ChatClient], gateway: GatewayProcess) -> str:
    lines = []
    for c in clients:
        if not c.done:
            missing = [m for m, _ in c.messages if m not in c.finals]
            lines.append(f"{c.chat_id}: missing {missing} connects={c.connects} {c.disconnects}")
    db = sqlite3.connect(gateway.state_dir / "chatgate.db")
    try:
        lines += [repr(db.execute(query).fetchall()) for query in _DIAGNOSTIC_QUERIES]
    finally:
        db.close()
    lines.append(gateway.logs()[-3000:])
    return "\n".join(lines)


async def test_sigkill_at_three_random_moments_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    gateway = GatewayProcess(
        tmp_path,
        {"agent": {"echo": {"chunk_delay_ms": 3, "chunk_chars": 4}}, "shutdown": {"drain_seconds": 1}},
    )
    await gateway.start()
    url = f"ws://127.0.0.1:{gateway.port}/ws"
    clients = [
        ChatClient(
            url,
            f"chat{c}",
            [(f"c{c}m{i}", f"message {i} of chat {c} (seed {seed})") for i in range(PER_CHAT)],
        )
        for c in range(CHATS)
    ]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(client.run(stop)) for client in clients]

    def answered() -> int:
        return sum(len(c.finals) for c in clients)

    total = CHATS * PER_CHAT
    thresholds = sorted(rng.sample(range(total // 10, total * 8 // 10), KILLS))
    unanswered_at_kill: list[int] = []
    try:
        for threshold in thresholds:
            await _wait(lambda t=threshold: answered() >= t, 60, f"{threshold} answers")
            await asyncio.sleep(rng.uniform(0, 0.05))
            unanswered_at_kill.append(total - answered())
            await gateway.kill()
            await gateway.start()
        try:
            await _wait(lambda: all(c.done for c in clients), 90, "every message to be answered")
        except AssertionError as exc:
            crashed = [repr(t.exception()) for t in tasks if t.done() and t.exception()]
            raise AssertionError(f"{exc}\nseed={seed} {crashed}\n{_diagnose(clients, gateway)}") from None
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        exit_code = await gateway.terminate()

    context = f"seed={seed} thresholds={thresholds}\n{gateway.logs()}"
    assert gateway.starts == KILLS + 1
    assert exit_code == 0, context
    for client in clients:
        assert not client.errors, (client.chat_id, client.errors, context)
        for mid, text in client.messages:
            distinct = set(client.finals[mid])
            assert distinct == {(client.finals[mid][0][0], f"echo: {text}")}, (
                mid,
                client.finals[mid],
                context,
            )
        assert client.first_final_order == [mid for mid, _ in client.messages], (client.chat_id, context)
        # A resent message that had been committed before the crash is a duplicate, answered once.
        for mid in client.duplicate_acks:
            assert len(set(client.finals[mid])) == 1

    # The store agrees: every message admitted once, processed once, one final each.
    db = sqlite3.connect(gateway.state_dir / "chatgate.db")
    try:
        inbox = db.execute("SELECT status, COUNT(*) FROM inbox GROUP BY status").fetchall()
        assert inbox == [("done", total)], (inbox, context)
        finals = db.execute(
            "SELECT COUNT(*), COUNT(DISTINCT in_reply_to) FROM outbox WHERE kind = 'final'"
        ).fetchone()
        assert finals == (total, total), context
    finally:
        db.close()
    assert all(unanswered > 0 for unanswered in unanswered_at_kill), unanswered_at_kill
