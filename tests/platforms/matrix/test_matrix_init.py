"""``chatgate init`` offers Matrix: the homeserver and the token's variable, checked live with
``whoami`` against a real Synapse; a refused token writes nothing and is never shown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from matrix.homeserver import Synapse

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
