"""A Telegram bot served by a fleet of two gateways on one PostgreSQL schema (the Bot API double).

Exactly one process polls (the bot token's advisory lock); the other stands by and only
sends. SIGKILL the poller: the standby takes polling over within a few seconds, from the
offset the fleet stored, so no update is lost and none is answered twice. Cut the
connection that holds the poller's lock (``pg_terminate_backend``): it stops polling
before its next getUpdates, so the two never poll at once, whichever of them polls next.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from telegram_double import BOT_ID, TOKEN_ENV, BotApiDouble, User, echo_of, overlapping, private

from chatgate.app.fleet import credential_key
from support.postgres import DSN, pg_schema_fixture, sql  # noqa: F401  (the pg_schema fixture)
from support.procs import GatewayProcess, wait_until

pytestmark = pytest.mark.slow
MARKER = "(possible repeat) "
STANDBY = "another process of the fleet polls; this one stands by"
TOOK_OVER = "the process that polled is gone; this one polls now"
LOST = "this process lost the polling lock; it stopped polling and stands by"
CUT_LOCK = """
    WITH k AS (SELECT hashtextextended('chatgate-credential/' || $1, 0) AS v)
    SELECT pg_terminate_backend(l.pid) FROM pg_locks l, k
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
      AND l.classid = ((k.v >> 32) & 4294967295)::oid AND l.objid = (k.v & 4294967295)::oid
"""
"""Terminate the server backend whose session holds the bot token's fleet lock."""
HELD_LOCK = CUT_LOCK.replace("pg_terminate_backend(l.pid)", "l.pid")
TAKE_LOCK = "SELECT pg_try_advisory_lock(hashtextextended('chatgate-credential/' || $1, 0))"
"""Never waits: the standby may have taken the freed lock first, and then holds it for good."""


@pytest.fixture(name="double")
async def fleet_double(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[BotApiDouble]:
    """A Bot API double with a token of this test's own, in the gateways' environment.

    The token's fleet lock is an advisory lock of the whole database (one poller per token,
    whatever the schema), and every test run on this machine shares the database."""
    server = BotApiDouble(token=f"{BOT_ID}:AAH-{uuid.uuid4().hex}", cancel_abandoned=True)
    monkeypatch.setenv(TOKEN_ENV, server.token)
    await server.start()
    yield server
    await server.stop()


def _config(
    double: BotApiDouble, schema: str, users: list[str], drop_pending: bool = False
) -> dict[str, Any]:
    return {
        "store": {"url": DSN, "postgres": {"schema": schema}},
        "agent": {"echo": {"chunk_delay_ms": 5}},
        "platforms": {
            "web": {"enabled": False},
            "telegram": {
                "enabled": True,
                "token_env": TOKEN_ENV,
                "allow_users": users,
                "api_base": double.base,
                "poll_timeout_seconds": 2,
                "drop_pending_updates": drop_pending,
            },
        },
        "delivery": {"duplicate_marker": MARKER},
        "shutdown": {"drain_seconds": 1},
    }


@pytest.mark.parametrize("drop_pending", [False, True], ids=["backlog", "drop_pending_updates"])
async def test_one_process_polls_and_another_takes_over_when_it_dies_losing_nothing(
    double: BotApiDouble, tmp_path: Path, pg_schema: str, drop_pending: bool
) -> None:
    """With ``drop_pending_updates`` too: that is for start-up; a takeover drops nothing."""
    users = [User(4400 + n, f"Ivy{n}") for n in range(4)]
    config = _config(double, pg_schema, [str(u.id) for u in users], drop_pending)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    fleet = [GatewayProcess(tmp_path / name, config) for name in ("a", "b")]
    await fleet[0].start()
    await fleet[1].start()
    pushed: list[tuple[int, int, str]] = []

    async def push(round_: int) -> None:
        for user in users:
            text = f"r{round_}-{user.first_name}"
            _, message_id = await double.push_message(private(user), user, text)
            pushed.append((user.id, message_id, text))

    def answered() -> bool:
        return all(
            any(m.reply_to == mid and m.text.endswith(echo_of(text)) for m in double.view(chat))
            for chat, mid, text in pushed
        )

    try:
        standing_by = [g for g in fleet if STANDBY in g.logs()]
        assert len(standing_by) == 1, "exactly one process polls the bot, the other stands by"
        poller = next(g for g in fleet if g is not standing_by[0])
        await push(0)
        await double.wait_for(answered, timeout=60, what="the first round answered")
        await poller.kill()
        await push(1)
        await wait_until(lambda: TOOK_OVER in standing_by[0].logs(), 30, "the standby to take polling over")
        await push(2)
        await double.wait_for(answered, timeout=60, what="every round answered after the takeover")
        await poller.start()  # back, it stands by: the survivor polls now
        await wait_until(lambda: STANDBY in poller.logs(), 30, "the restarted process to stand by")
        await push(3)
        await double.wait_for(answered, timeout=60, what="the last round answered")
    finally:
        for gateway in fleet:
            if gateway.proc is not None and gateway.proc.returncode is None:
                await gateway.terminate()

    assert overlapping(double.polls) == [], "the standby polled only once the killed poller had stopped"
    _answered_once(double, pushed)


async def wait_for_holder(key: str) -> None:
    """Until a process of the fleet holds the bot's lock again."""
    async with asyncio.timeout(30):
        while not await sql(HELD_LOCK, key):  # noqa: ASYNC110  (another process's state: no event to wait on)
            await asyncio.sleep(0.1)


def _answered_once(double: BotApiDouble, pushed: list[tuple[int, int, str]]) -> None:
    for chat, mid, text in pushed:
        answers = [m for m in double.view(chat) if m.reply_to == mid]
        plain = [m for m in answers if m.text == echo_of(text)]
        marked = [m for m in answers if m.text == MARKER + echo_of(text)]
        assert len(plain) == 1 or (not plain and len(marked) == 1), f"{text!r} answered {answers}"


async def test_a_poller_whose_lock_connection_is_cut_stops_before_another_polls(
    double: BotApiDouble, tmp_path: Path, pg_schema: str
) -> None:
    users = [User(4500 + n, f"Uma{n}") for n in range(3)]
    config = _config(double, pg_schema, [str(u.id) for u in users])
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    fleet = [GatewayProcess(tmp_path / name, config) for name in ("a", "b")]
    pushed: list[tuple[int, int, str]] = []
    key = credential_key("telegram", double.token)

    async def push(round_: int) -> None:
        for user in users:
            text = f"c{round_}-{user.first_name}"
            _, message_id = await double.push_message(private(user), user, text)
            pushed.append((user.id, message_id, text))

    def answered() -> bool:
        return all(
            any(m.reply_to == mid and m.text.endswith(echo_of(text)) for m in double.view(chat))
            for chat, mid, text in pushed
        )

    def losses() -> int:
        return sum(g.logs().count(LOST) for g in fleet)

    try:
        for gateway in fleet:
            await gateway.start()
        await push(0)
        await double.wait_for(answered, timeout=60, what="the first round answered")
        for cut in range(1, 4):
            before = losses()
            rival = await asyncpg.connect(DSN)
            try:
                assert len(await sql(CUT_LOCK, key)) == 1, "one session holds the bot's lock"
                # A rival takes the freed lock, as a standby quicker than the cut-off poller's
                # reconnect would, unless the fleet's standby was quicker still (then it polls
                # next); the rival lets go once the poller stood by.
                await rival.fetchval(TAKE_LOCK, key)
                await push(cut)  # whoever polls next admits these
                await wait_until(lambda b=before: losses() > b, 30, f"the poller to stand by after cut {cut}")
            finally:
                await rival.close()
            await double.wait_for(answered, timeout=60, what=f"round {cut} answered after the cut")
            await wait_for_holder(key)
    finally:
        for gateway in fleet:
            if gateway.proc is not None and gateway.proc.returncode is None:
                await gateway.terminate()

    assert overlapping(double.polls) == [], "two processes called getUpdates at the same time"
    _answered_once(double, pushed)
