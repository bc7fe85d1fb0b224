"""A kill is not the message's fault: real ``chatgate run`` processes, killed for real.

- A message whose turn itself brings the process down (the offline agent exits the
  process on a magic text) is given up, with the user told, after the gateway died
  while it ran isolated ``scheduler.max_turn_attempts`` times; the other chats go on.
- Thousands of messages under dozens of random SIGKILLs are all answered, exactly once,
  and none is given up (``CHATGATE_CHAOS_MESSAGES`` / ``CHATGATE_CHAOS_KILLS`` /
  ``CHATGATE_CHAOS_CHATS`` scale it up for a longer local run).
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import sys
from pathlib import Path

import pytest
import websockets

from support.poison_agent import POISON
from support.procs import ChatClient, FrameClient, GatewayProcess, wait_until

pytestmark = pytest.mark.slow
LAUNCHER = [sys.executable, str(Path(__file__).parents[1] / "support" / "poison_agent.py")]
GAVE_UP = "so I gave up instead of trying forever"


async def _restart_until(gateway: GatewayProcess, done: object, deaths: int, timeout: float) -> int:
    """Play systemd: start the gateway again each time it dies, until ``done()``; count deaths.

    Like systemd, it does not wait for a start to be ready: a resumed poisoned turn may kill
    the process before its HTTP server serves (it starts after the platforms, issue 13)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():  # type: ignore[operator]
        assert gateway.proc is not None
        if gateway.proc.returncode is not None:
            deaths += 1
            await gateway.start(launcher=LAUNCHER, wait=False)
        assert loop.time() < deadline, f"not done after {deaths} deaths: {gateway.logs()}"
        await asyncio.sleep(0.05)
    return deaths


@pytest.mark.timeout(240)  # five real starts of the gateway, each dying on the poison
async def test_a_message_that_brings_the_process_down_is_given_up_and_the_user_told(tmp_path: Path) -> None:
    gateway = GatewayProcess(
        tmp_path, {"agent": {"echo": {"chunk_delay_ms": 1}}, "scheduler": {"max_turn_attempts": 2}}
    )
    await gateway.start(launcher=LAUNCHER)
    victim = FrameClient(gateway.port, "victim", "u-victim")
    await victim.connect()
    await victim.message("p1", f"please run {POISON}")
    finals: list[dict[str, object]] = []

    def given_up() -> bool:
        finals[:] = [f for f in victim.frames if f["type"] == "final" and f.get("in_reply_to") == "p1"]
        return bool(finals)

    async def reconnect() -> None:
        while not given_up():
            if victim._reader is None or victim._reader.done():
                await victim.close()
                try:
                    await victim.connect(timeout=5)
                except (OSError, AssertionError, websockets.WebSocketException):
                    # A start dies on the poison before or during its HTTP handshake.
                    await asyncio.sleep(0.1)
            await asyncio.sleep(0.05)

    keeper = asyncio.create_task(reconnect())
    try:
        deaths = await _restart_until(gateway, given_up, 0, 200)
        await keeper
        (final,) = finals
        assert GAVE_UP in str(final["text"]), final
        # In flight at two deaths (unblamed), then blamed twice while it ran isolated.
        assert deaths == 4, gateway.logs()
        other = FrameClient(gateway.port, "bystander", "u-other")
        await other.connect()
        await other.message("b1", "still there?")
        assert (await other.final("b1"))["text"] == "echo: still there?"
        await victim.message("p2", "and me?")
        assert (await victim.final("p2"))["text"] == "echo: and me?", "the session is not stuck"
        await other.close()
    finally:
        keeper.cancel()
        await asyncio.gather(keeper, return_exceptions=True)
        await victim.close()
        assert await gateway.terminate() == 0, gateway.logs()
    db = sqlite3.connect(gateway.state_dir / "chatgate.db")
    try:
        row = db.execute(
            "SELECT outcome, crashes FROM inbox WHERE inbound_json LIKE ?", (f"%{POISON}%",)
        ).fetchone()
    finally:
        db.close()
    assert row == ("given_up", 2)


CHAOS_MESSAGES = int(os.environ.get("CHATGATE_CHAOS_MESSAGES", "600"))
CHAOS_CHATS = int(os.environ.get("CHATGATE_CHAOS_CHATS", "30"))
CHAOS_KILLS = int(os.environ.get("CHATGATE_CHAOS_KILLS", "8"))
"""The issue's figures are 2,000 / 50 / 30 (about 4 minutes on 2 loaded cores): set them for a
long local run. The default keeps the suite's run short and still kills mid-turn many times."""


LIFE_SECONDS = 3.0
"""Each life of the gateway ends after a random 0 to 3 s (then the next start), while turns of
about a second run in every chat: kills land before the work a start resumed is done, again and
again (the storms that gave messages up when every death counted)."""


@pytest.mark.xdist_group("chaos")
@pytest.mark.timeout(900)  # many real restarts under load; CHATGATE_CHAOS_* make it longer on purpose
async def test_thousands_of_messages_under_random_kills_are_all_answered_once_none_given_up(
    tmp_path: Path,
) -> None:
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    per_chat = CHAOS_MESSAGES // CHAOS_CHATS
    total = per_chat * CHAOS_CHATS
    gateway = GatewayProcess(
        tmp_path,
        {"agent": {"echo": {"chunk_delay_ms": 250, "chunk_chars": 8}}, "shutdown": {"drain_seconds": 1}},
    )
    await gateway.start()
    url = f"ws://127.0.0.1:{gateway.port}/ws"
    clients = [
        ChatClient(url, f"chat{c}", [(f"c{c}m{i}", f"message {i} of chat {c}") for i in range(per_chat)])
        for c in range(CHAOS_CHATS)
    ]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(client.run(stop)) for client in clients]

    def answered() -> int:
        return sum(len(c.finals) for c in clients)

    lives = [rng.uniform(0, LIFE_SECONDS) for _ in range(CHAOS_KILLS)]
    killed_at: list[int] = []
    try:
        for life in lives:
            await asyncio.sleep(life)
            if answered() >= total:
                break
            killed_at.append(answered())
            await gateway.kill()
            await gateway.start()
        await wait_until(lambda: all(c.done for c in clients), 300, f"every answer (seed {seed})")
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        exit_code = await gateway.terminate()
    context = f"seed={seed} answered at each kill={killed_at}\n{gateway.logs()[-3000:]}"
    assert exit_code == 0, context
    gave_up = [mid for c in clients for mid, shown in c.finals.items() if any(GAVE_UP in t for _, t in shown)]
    assert gave_up == [], f"{len(gave_up)} messages given up: {gave_up[:10]} {context}"
    for client in clients:
        for mid, text in client.messages:
            assert {t for _, t in client.finals[mid]} == {f"echo: {text}"}, (mid, client.finals[mid], context)
            assert len({m for m, _ in client.finals[mid]}) == 1, "one final row per message"
    db = sqlite3.connect(gateway.state_dir / "chatgate.db")
    try:
        outcomes = db.execute("SELECT status, outcome, COUNT(*) FROM inbox GROUP BY 1, 2").fetchall()
        finals = db.execute("SELECT COUNT(*) FROM outbox WHERE kind = 'final'").fetchone()
    finally:
        db.close()
    assert outcomes == [("done", "ok", total)], (outcomes, context)
    assert finals == (total,), context
    assert gateway.starts == len(killed_at) + 1
    assert len(killed_at) >= CHAOS_KILLS // 2, f"too few kills before the last answer: {context}"
