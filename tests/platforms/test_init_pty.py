"""``chatgate init`` through a real pseudo-terminal for the native platforms beyond Telegram
(``test_secrets_file.py`` has Telegram's): a refused credential is asked for again with the
reason, nothing typed before is lost, the files are written, and ``chatgate run`` on them answers
on that platform. One shared dialogue helper; each platform adds only its own answers.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import pexpect
import pytest
from discord_fake.harness import ANN, build_world, fake, wait_for
from discord_fake.server import FakeDiscord
from discord_fake.state import TOKEN as DISCORD_TOKEN

from chatgate.app.config.envfile import read_env_file
from chatgate.domain.pairing import CODE_ALPHABET
from support.procs import GatewayProcess

__all__ = ["fake"]
pytestmark = pytest.mark.slow
TIMEOUT = 60
Step = tuple[str, str | None]
"""What the terminal shows (a regex), then the line typed (None: nothing, just wait for it)."""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATGATE_", "DBUS_", "DISCORD_"))}
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"), TERM="dumb")
    return env


def init_dialogue(tmp_path: Path, flags: Sequence[str], steps: Sequence[Step]) -> str:
    """Run ``chatgate init --write <tmp>/chatgate.yaml --state-dir <tmp>/run/state --agent echo`` in a
    pty, answering ``steps`` in order, then the access questions and the write; the transcript."""
    target, state = tmp_path / "chatgate.yaml", tmp_path / "run" / "state"
    argv = ["-m", "chatgate", "init", "--write", str(target), "--state-dir", str(state), "--agent", "echo",
            "--no-service", *flags]  # fmt: skip
    child = pexpect.spawn(sys.executable, argv, env=_env(tmp_path), encoding="utf-8", timeout=TIMEOUT)
    transcript: list[str] = []
    common: list[Step] = [(r"\[pairing\]: ", ""), (r"User ids .*: ", ""), (r"\(y/n\) \[y\]: ", "y")]
    try:
        for shown, typed in [*steps, *common]:
            child.expect(shown)
            transcript.append(str(child.before) + str(child.after))
            if typed is not None:
                child.sendline(typed)
        child.expect(pexpect.EOF)
        transcript.append(str(child.before))
    finally:
        child.close()
    assert child.exitstatus == 0, "".join(transcript)
    return "".join(transcript)


async def test_discord_init_asks_again_for_a_refused_token_then_run_answers(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    world = build_world(fake)
    paste = r"Paste the bot token \(hidden; saved as DISCORD_BOT_TOKEN in .*Enter to skip: "
    steps: list[Step] = [
        (r"holding the bot token \[DISCORD_BOT_TOKEN\]: ", ""),
        (paste, "not-the-token"),
        (r"Discord check failed: .*401.*Paste it again \(or Enter to skip\)\.", None),
        (paste, DISCORD_TOKEN),
        (r"Discord: ", None),
    ]
    flags = ["--platform", "discord", "--discord-api-base", fake.base + "/api/v10"]
    transcript = await asyncio.to_thread(init_dialogue, tmp_path, flags, steps)
    assert DISCORD_TOKEN not in transcript and "not-the-token" not in transcript
    assert read_env_file(tmp_path / "run" / "state" / "chatgate.env") == {"DISCORD_BOT_TOKEN": DISCORD_TOKEN}
    written = (tmp_path / "chatgate.yaml").read_text()
    assert DISCORD_TOKEN not in written and "token_env: DISCORD_BOT_TOKEN" in written

    gateway = GatewayProcess(tmp_path / "run", {})
    gateway.config_path = tmp_path / "chatgate.yaml"
    locks = f"CHATGATE_LOCKS__CREDENTIAL_DIR={tmp_path / 'locks'}"
    await gateway.start(launcher=["env", locks, sys.executable, "-m", "chatgate.app.cli"])
    try:
        await wait_for(lambda: fake.gateway.identifies >= 1, 60, "the gateway's IDENTIFY")
        await fake.post(world.dm, ANN, "hi bot")
        code = re.compile(rf"\b[{CODE_ALPHABET}]{{8}}\b")

        def replies() -> list[str]:
            said = [m.content for posted in fake.messages.values() for m in posted]
            return [text for text in said if text != "hi bot" and code.search(text)]

        await wait_for(replies, 60, "the pairing reply on Discord")
    finally:
        await gateway.kill()
