"""A real ``chatgate run`` on a real Synapse, SIGKILLed mid-burst and kept down 5 s while
people keep writing: after the restart everything is answered, once.

The sync token is stored only after the events it covers are admitted, so the restart syncs
from the last committed token; with ``timeline_limit: 3`` every room's gap is longer than
one sync answer holds and is read back with ``/messages``. A reply whose send the kill cut
short goes out again in the same transaction id, which the homeserver recognizes, so no
question shows two answers.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from matrix.harness import TOKEN_ENV, People, matrix_config, wait_for
from matrix.readback import ask, check_answered_once, make_conversations, unanswered
from support.procs import GatewayProcess

pytestmark = pytest.mark.slow
DOWN_SECONDS = 5.0


@pytest.mark.timeout(300)
async def test_a_sigkill_and_5s_down_lose_nothing_and_answer_nothing_twice(
    people: People, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = people.account("bot")
    monkeypatch.setenv(TOKEN_ENV, bot.token)
    config = matrix_config(people.server, bot, tmp_path, section={"timeline_limit": 3})
    del config["http"]
    gateway = GatewayProcess(tmp_path, config)
    await gateway.start()
    try:
        conversations = await make_conversations(people, bot.user_id, 4)
        await asyncio.gather(*(ask(c, bot.user_id, "warm", 1) for c in conversations))
        await wait_for(lambda: _none(unanswered(conversations, bot.user_id)), 60, "warm-up answers")

        burst = asyncio.gather(*(ask(c, bot.user_id, "burst", 4) for c in conversations))
        await wait_for(lambda: _some_asked(conversations, 9), 60, "the burst under way")
        await gateway.kill()  # mid-burst: events being admitted, replies streaming and sending
        killed = time.monotonic()
        await burst
        await asyncio.gather(*(ask(c, bot.user_id, "while down", 5) for c in conversations))
        await asyncio.sleep(max(0.0, DOWN_SECONDS - (time.monotonic() - killed)))  # the downtime itself
        down = time.monotonic() - killed

        restarted = time.monotonic()
        await gateway.start()
        await wait_for(lambda: _none(unanswered(conversations, bot.user_id)), 120, "every answer", every=0.5)
        caught_up = time.monotonic() - restarted
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()

    repeats = await check_answered_once(conversations, bot.user_id, kills=1)
    asked = sum(len(c.asked) for c in conversations)
    print(f"\nMatrix SIGKILL: {asked} questions, down {down:.1f}s, all answered {caught_up:.1f}s after the"
          f" restart, {repeats} marked repeats")  # fmt: skip
    db = sqlite3.connect(gateway.state_dir / "chatgate.db")
    try:
        ids = [r[0] for r in db.execute("SELECT delivery_id FROM inbox WHERE transport = 'matrix'")]
        statuses = {r[0] for r in db.execute("SELECT status FROM inbox")}
    finally:
        db.close()
    assert len(ids) == len(set(ids)) == asked, "every message admitted exactly once"
    assert statuses == {"done"}
    assert gateway.starts == 2
    assert bot.token not in gateway.logs()
    second = (tmp_path / "gateway-2.log").read_text(errors="replace")
    assert "read back" in second, "the restart read a gap back with /messages"


async def _none(pending: object) -> bool:
    return not await pending  # type: ignore[misc]


def _some_asked(conversations: list, count: int) -> bool:  # type: ignore[type-arg]
    return sum(len(c.asked) for c in conversations) >= len(conversations) + count
