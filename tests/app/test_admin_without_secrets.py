"""Issue 31, item 4: the admin commands work in a fresh terminal without the runtime secrets
(the model key, a platform token): they read the config and the store, never call out.
``config check`` checks the file and only warns of a secret set nowhere (``--strict`` makes that
its 78, as for ``run``): test_secrets_file.py::test_every_command_reads_the_file_of_its_state_dir."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

CONFIG = {
    "agent": {"kind": "openai", "openai": {"base_url": "http://127.0.0.1:9/v1", "model": "m",
                                           "api_key_env": "ADMIN_TEST_OPENAI_KEY"}},
    "platforms": {"web": {"enabled": False},
                  "telegram": {"enabled": True, "token_env": "ADMIN_TEST_TELEGRAM_TOKEN", "pairing": True}},
}  # fmt: skip
COMMANDS = [
    ("status",),
    ("sessions",),
    ("pairing", "list"),
    ("schedules", "list"),
    ("user", "list"),
    ("api-key", "list"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_an_admin_command_needs_no_runtime_secret(tmp_path: Path, command: tuple[str, ...]) -> None:
    config = tmp_path / "chatgate.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATGATE_", "ADMIN_TEST_"))}
    env["CHATGATE_STATE_DIR"] = str(tmp_path / "state")
    done = subprocess.run(
        [sys.executable, "-m", "chatgate", *command, "--config", str(config)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    said = done.stdout + done.stderr
    # 0, 1 ("no database yet") or 3 (status: "not running") are answers; 78 would be the refusal
    assert done.returncode in (0, 1, 3), said
    assert "is not set" not in said and "ADMIN_TEST_OPENAI_KEY" not in said.replace("api_key_env", ""), said
