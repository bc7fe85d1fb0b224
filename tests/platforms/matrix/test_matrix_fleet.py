"""A Matrix bot served by a fleet of two gateways on one PostgreSQL schema and a real Synapse.

One process syncs (the account's advisory lock); the other stands by and only sends. SIGKILL
the syncing one while people write: the standby takes syncing over from the token the fleet
stored, so everything is answered, once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from matrix.harness import TOKEN_ENV, People, matrix_config, wait_for
from matrix.readback import ask, check_answered_once, make_conversations, unanswered
from support.postgres import DSN, pg_schema_fixture  # noqa: F401  (the pg_schema fixture)
from support.procs import GatewayProcess, wait_until

pytestmark = pytest.mark.slow
STANDBY = "another process of the fleet polls; this one stands by"
TOOK_OVER = "the process that polled is gone; this one polls now"


@pytest.mark.timeout(300)
async def test_the_standby_takes_sync_over_from_the_stored_token_when_the_syncing_process_dies(
    people: People, tmp_path: Path, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = people.account("bot")
    monkeypatch.setenv(TOKEN_ENV, bot.token)
    config = matrix_config(
        people.server, bot, tmp_path, store={"url": DSN, "postgres": {"schema": pg_schema}},
        shutdown={"drain_seconds": 1},
    )  # fmt: skip
    del config["http"], config["locks"]
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    fleet = [GatewayProcess(tmp_path / name, config) for name in ("a", "b")]
    await fleet[0].start()
    await fleet[1].start()
    try:
        standing_by = [g for g in fleet if STANDBY in g.logs()]
        assert len(standing_by) == 1, "exactly one process syncs, the other stands by"
        syncer = next(g for g in fleet if g is not standing_by[0])
        conversations = await make_conversations(people, bot.user_id, 2)
        await asyncio.gather(*(ask(c, bot.user_id, "before", 2) for c in conversations))
        await wait_for(lambda: _none(unanswered(conversations, bot.user_id)), 60, "the first round")
        await syncer.kill()
        await asyncio.gather(*(ask(c, bot.user_id, "while taking over", 3) for c in conversations))
        await wait_until(lambda: TOOK_OVER in standing_by[0].logs(), 60, "the standby to take syncing over")
        await asyncio.gather(*(ask(c, bot.user_id, "after", 2) for c in conversations))
        await wait_for(lambda: _none(unanswered(conversations, bot.user_id)), 90, "every answer", every=0.5)
    finally:
        for gateway in fleet:
            if gateway.proc is not None and gateway.proc.returncode is None:
                await gateway.terminate()
    assert await check_answered_once(conversations, bot.user_id, kills=1) == 0


async def _none(pending: object) -> bool:
    return not await pending  # type: ignore[misc]
