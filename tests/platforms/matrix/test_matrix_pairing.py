"""DM pairing by Matrix user id on a real Synapse: a stranger's DM (the invite accepted because
pairing is on) is refused and answered with a one-time code; ``chatgate pairing approve CODE``,
run beside the gateway, lets their next message through."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest

from chatgate.domain.pairing import CODE_ALPHABET
from matrix.client import shown_by
from matrix.harness import TOKEN_ENV, People, echo_of, joined, matrix_config, wait_for
from support.procs import GatewayProcess

pytestmark = pytest.mark.slow
CODE = re.compile(rf"\b([{CODE_ALPHABET}]{{8}})\b")


async def pairing_cli(gateway: GatewayProcess, *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "chatgate", "pairing", *args,
        "--config", str(gateway.config_path), "--state-dir", str(gateway.state_dir),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


@pytest.mark.timeout(180)
async def test_a_stranger_gets_a_code_and_once_approved_is_answered(
    people: People, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot, kim = people.account("bot"), people.person("kim")
    monkeypatch.setenv(TOKEN_ENV, bot.token)
    config = matrix_config(people.server, bot, tmp_path, section={"allow_all": False, "pairing": True})
    del config["http"]
    gateway = GatewayProcess(tmp_path, config)
    await gateway.start()
    try:
        room = await kim.create_room(invite=[bot.user_id], direct=True)
        await joined(kim, room, bot.user_id)  # auto_join: allowed takes anyone while pairing is on
        await kim.say(room, "hello?")

        async def texts() -> list[str]:
            return [s.text for s in shown_by(await kim.events(room), bot.user_id)]

        [reply] = await wait_for(texts, 60, "the pairing reply")
        found = CODE.search(reply)
        assert found and "pairing approve" in reply and "echo:" not in reply, reply
        status, out = await pairing_cli(gateway, "approve", found.group(1))
        assert status == 0 and kim.user_id in out, out
        await asyncio.sleep(1.5)  # the authorizer's approved-set cache is 1 s (docs/operations.md)
        await kim.say(room, "now?")

        async def answered() -> bool:
            return echo_of("now?") in await texts()

        await wait_for(answered, 60, "the approved user's answer")
        assert echo_of("hello?") not in await texts()  # the refused message never became a turn
    finally:
        await gateway.kill()
