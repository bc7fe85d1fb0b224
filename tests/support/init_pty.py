"""``chatgate init`` driven through a real pseudo-terminal (pexpect), shared by the per-platform
init tests: each gives its own questions and answers; the access questions and the write are here."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pexpect

from chatgate.app.config.envfile import read_env_file
from support.procs import GatewayProcess

TIMEOUT = 60
Step = tuple[str, str | None]
"""What the terminal shows (a regex), then the line typed (None: nothing, just wait for it)."""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("CHATGATE_", "DBUS_", "DISCORD_", "SLACK_"))
    }
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"), TERM="dumb")
    return env


def init_dialogue(tmp_path: Path, flags: Sequence[str], steps: Sequence[Step], let_in: str = "") -> str:
    """Run ``chatgate init --write <tmp>/chatgate.yaml --state-dir <tmp>/run/state --agent echo`` in a
    pty, answering ``steps`` in order, then the access questions and the write; the transcript."""
    target, state = tmp_path / "chatgate.yaml", tmp_path / "run" / "state"
    argv = ["-m", "chatgate", "init", "--write", str(target), "--state-dir", str(state), "--agent", "echo",
            "--no-service", *flags]  # fmt: skip
    child = pexpect.spawn(sys.executable, argv, env=_env(tmp_path), encoding="utf-8", timeout=TIMEOUT)
    transcript: list[str] = []
    common: list[Step] = [(r"\[pairing\]: ", ""), (r"User ids .*: ", let_in), (r"\(y/n\) \[y\]: ", "y")]
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


async def run_written(tmp_path: Path) -> GatewayProcess:
    """``chatgate run`` on the files init wrote, untouched (the test's lock dir by variable)."""
    gateway = GatewayProcess(tmp_path / "run", {})
    gateway.config_path = tmp_path / "chatgate.yaml"
    locks = f"CHATGATE_LOCKS__CREDENTIAL_DIR={tmp_path / 'locks'}"
    await gateway.start(launcher=["env", locks, sys.executable, "-m", "chatgate.app.cli"])
    return gateway


def secrets_written(tmp_path: Path) -> dict[str, str]:
    return read_env_file(tmp_path / "run" / "state" / "chatgate.env")


def paste(env: str, what: str) -> str:
    return rf"Paste {what} \(hidden; saved as {env} in .*Enter to skip: "
