"""``chatgate init`` offers Matrix: the homeserver and the token's variable, checked live with
``whoami`` against a real Synapse; a refused token writes nothing and is never shown (``--yes``),
or, pasted in a terminal, is asked for again; ``chatgate run`` on the written files answers."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from chatgate.domain.pairing import CODE_ALPHABET
from matrix.client import shown_by
from matrix.harness import People, joined, wait_for
from matrix.homeserver import Synapse
from support.init_pty import Step, init_dialogue, paste, run_written, secrets_written

pytestmark = pytest.mark.slow
TIMEOUT = 60


def _env(tmp_path: Path, token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATGATE_", "DBUS_"))}
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"), TERM="dumb")
    env["MY_MATRIX_TOKEN"] = token
    return env


def test_init_checks_the_token_with_whoami_and_writes_the_section(synapse: Synapse, tmp_path: Path) -> None:
    bot = synapse.register("bot")
    target = tmp_path / "chatgate.yaml"
    command = [
        sys.executable, "-m", "chatgate", "init", "--write", str(target), "--yes", "--agent", "echo",
        "--platform", "matrix", "--matrix-homeserver", synapse.base, "--matrix-token-env", "MY_MATRIX_TOKEN",
        "--allow", "allowlist", "--allow-user", "@ann:localhost",
    ]  # fmt: skip
    done = subprocess.run(
        command, env=_env(tmp_path, bot.token), capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    assert "the token belongs to" in done.stdout and bot.user_id in done.stdout
    matrix = yaml.safe_load(target.read_text())["platforms"]["matrix"]
    assert matrix == {
        "enabled": True, "homeserver": synapse.base, "access_token_env": "MY_MATRIX_TOKEN",
        "user_id": bot.user_id, "pairing": False, "allow_users": ["@ann:localhost"],
    }  # fmt: skip
    assert bot.token not in done.stdout + done.stderr

    before = target.read_text()
    bad = subprocess.run(
        command, env=_env(tmp_path, "syt_not_a_real_token"), capture_output=True, text=True, timeout=TIMEOUT
    )
    assert bad.returncode == 1 and "did not pass its check" in bad.stderr
    assert "syt_not_a_real_token" not in bad.stdout + bad.stderr
    assert target.read_text() == before


@pytest.mark.timeout(180)
async def test_init_through_a_terminal_asks_again_for_a_refused_token_then_run_answers(
    people: People, tmp_path: Path
) -> None:
    bot, kim = people.account("initbot"), people.person("initkim")
    token = paste("MATRIX_ACCESS_TOKEN", "the access token")
    steps: list[Step] = [
        (token, "syt_not_a_real_token"),
        (r"Matrix check failed: .*Paste it again \(or Enter to skip\)\.", None),
        (token, bot.token),
        (r"Matrix: the token belongs to", None),
    ]
    flags = ["--platform", "matrix", "--matrix-homeserver", people.server.base,
             "--matrix-token-env", "MATRIX_ACCESS_TOKEN"]  # fmt: skip
    transcript = await asyncio.to_thread(init_dialogue, tmp_path, flags, steps)
    assert bot.token not in transcript and "syt_not_a_real_token" not in transcript
    assert secrets_written(tmp_path) == {"MATRIX_ACCESS_TOKEN": bot.token}
    assert (
        yaml.safe_load((tmp_path / "chatgate.yaml").read_text())["platforms"]["matrix"]["user_id"]
        == bot.user_id
    )
    gateway = await run_written(tmp_path)
    try:
        room = await kim.create_room(invite=[bot.user_id], direct=True)
        await joined(kim, room, bot.user_id)  # pairing is on: the invite is taken
        await kim.say(room, "hello?")

        async def texts() -> list[str]:
            return [s.text for s in shown_by(await kim.events(room), bot.user_id)]

        [reply] = await wait_for(texts, 60, "the pairing reply")
        assert re.search(rf"\b[{CODE_ALPHABET}]{{8}}\b", reply), reply
    finally:
        await gateway.kill()
