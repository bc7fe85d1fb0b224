"""The secrets file ``<state dir>/chatgate.env``: written private and atomically with the other
entries kept, read by every command (the environment wins), refused when others can read it,
and filled by ``chatgate init`` from a secret pasted at a hidden prompt (never echoed)."""

from __future__ import annotations

import asyncio
import io
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
import yaml
from telegram_double import BOT_USERNAME, TOKEN, BotApiDouble

from chatgate.app.config.envfile import load_env_file, read_env_file, save_secrets
from chatgate.domain.pairing import CODE_ALPHABET
from support.procs import GatewayProcess

TIMEOUT = 60


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATGATE_", "DBUS_"))}
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"), TERM="dumb")
    return env


def chatgate(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chatgate", *args],
        capture_output=True, text=True, env={**_env(tmp_path), **extra}, timeout=TIMEOUT,
    )  # fmt: skip


def test_saving_creates_a_private_file_and_keeps_and_updates_other_entries(tmp_path: Path) -> None:
    path = tmp_path / "state" / "chatgate.env"
    save_secrets(path, {"A_TOKEN": "123:abc-DEF_ghi", "SPACED": "has a space # and hash"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text(path.read_text() + "# a note of the user\nMINE=kept\n")
    save_secrets(path, {"A_TOKEN": "new-value", "LATER": "x$y{z}"})
    text = path.read_text()
    assert "# a note of the user" in text and text.count("A_TOKEN=") == 1
    assert read_env_file(path) == {
        "A_TOKEN": "new-value", "SPACED": "has a space # and hash", "MINE": "kept", "LATER": "x$y{z}",
    }  # fmt: skip
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["chatgate.env"]  # no temporary file left


def test_a_value_that_cannot_be_written_safely_is_refused_not_mangled(tmp_path: Path) -> None:
    path = tmp_path / "chatgate.env"
    with pytest.raises(ValueError, match="spans lines"):
        save_secrets(path, {"BAD": "one\ntwo"})
    assert not path.exists()


def test_the_environment_wins_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "chatgate.env"
    save_secrets(path, {"SET_ALREADY": "from-file", "ONLY_IN_FILE": "file"})
    environ = {"SET_ALREADY": "from-env"}
    assert load_env_file(path, environ) == ["ONLY_IN_FILE"]
    assert environ == {"SET_ALREADY": "from-env", "ONLY_IN_FILE": "file"}


def _telegram_config(tmp_path: Path) -> Path:
    config = tmp_path / "chatgate.yaml"
    config.write_text(
        yaml.safe_dump({"platforms": {"telegram": {"enabled": True, "token_env": "FILE_TOKEN"}}})
    )
    return config


def test_every_command_reads_the_file_of_its_state_dir(tmp_path: Path) -> None:
    config, state = _telegram_config(tmp_path), tmp_path / "state"
    # Without the secret the file still checks (issue 31: admin commands need no runtime
    # secret), with a warning naming it; --strict refuses as `run` would.
    missing = chatgate(tmp_path, "config", "check", str(config), CHATGATE_STATE_DIR=str(state))
    assert missing.returncode == 0, missing.stderr
    assert "warning:" in missing.stderr and "FILE_TOKEN" in missing.stderr
    strict = chatgate(tmp_path, "config", "check", "--strict", str(config), CHATGATE_STATE_DIR=str(state))
    assert strict.returncode == 78 and "FILE_TOKEN is not set" in strict.stderr
    save_secrets(state / "chatgate.env", {"FILE_TOKEN": "123:secret"})
    done = chatgate(tmp_path, "config", "check", "--strict", str(config), CHATGATE_STATE_DIR=str(state))
    assert done.returncode == 0, done.stderr
    assert "warning:" not in done.stderr
    service = chatgate(
        tmp_path, "service", "install", "--print", "--config", str(config), "--state-dir", str(state)
    )
    assert service.returncode == 0, service.stderr
    assert f"EnvironmentFile=-{state / 'chatgate.env'}" in service.stdout


def test_a_file_others_can_read_is_refused_with_the_chmod_that_fixes_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    path = state / "chatgate.env"
    save_secrets(path, {"FILE_TOKEN": "123:secret"})
    path.chmod(0o644)
    done = chatgate(tmp_path, "sessions", "--state-dir", str(state))
    assert done.returncode == 78
    assert f"chmod 600 {path}" in done.stderr and "123:secret" not in done.stderr


@pytest.mark.slow
async def test_init_saves_a_pasted_token_to_the_file_never_showing_it(
    double: BotApiDouble, tmp_path: Path
) -> None:
    target, state = tmp_path / "chatgate.yaml", tmp_path / "run" / "state"
    # the double serves on this test's event loop: the terminal is driven from a thread
    transcript = await asyncio.to_thread(_paste_token, tmp_path, target, state, double.base)
    assert TOKEN not in transcript  # hidden prompt: the terminal never echoed it
    secrets = state / "chatgate.env"
    assert read_env_file(secrets) == {"TELEGRAM_BOT_TOKEN": TOKEN}
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert TOKEN not in target.read_text()
    done = chatgate(tmp_path, "config", "check", str(target), CHATGATE_STATE_DIR=str(state))
    assert done.returncode == 0, done.stderr

    # `chatgate run` on the written files, the token in no environment: it answers on Telegram
    assert "TELEGRAM_BOT_TOKEN" not in os.environ
    gateway = GatewayProcess(tmp_path / "run", {})
    gateway.config_path = target
    locks = f"CHATGATE_LOCKS__CREDENTIAL_DIR={tmp_path / 'locks'}"
    await gateway.start(launcher=["env", locks, sys.executable, "-m", "chatgate.app.cli"])
    try:
        assert re.search(rf"\b[{CODE_ALPHABET}]{{8}}\b", await double.pairing_code_for_a_stranger())
    finally:
        await gateway.kill()


def _paste_token(tmp_path: Path, target: Path, state: Path, api_base: str) -> str:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "chatgate", "init", "--write", str(target), "--state-dir", str(state), "--agent", "echo",
         "--platform", "telegram", "--telegram-api-base", api_base, "--no-service"],
        env=_env(tmp_path), encoding="utf-8", timeout=TIMEOUT,
    )  # fmt: skip
    child.logfile_read = io.StringIO()  # the whole transcript, to show the token never appears
    try:
        child.expect(r"holding the bot token \[TELEGRAM_BOT_TOKEN\]: ")
        child.sendline("")
        child.expect(
            r"Paste the token from @BotFather \(hidden; saved as TELEGRAM_BOT_TOKEN in .*Enter to skip: "
        )
        child.sendline(TOKEN)
        child.expect(rf"the token belongs to @{BOT_USERNAME}")
        child.expect(r"\[pairing\]: ")
        child.sendline("")
        child.expect(r"User ids .*: ")
        child.sendline("")
        child.expect(r"\(y/n\) \[y\]: ")
        child.sendline("y")
        child.expect(r"Saved TELEGRAM_BOT_TOKEN to .*chatgate\.env \(mode 0600")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    return child.logfile_read.getvalue()


def test_a_key_pasted_where_its_variable_name_goes_is_offered_under_that_variable(tmp_path: Path) -> None:
    target, state = tmp_path / "chatgate.yaml", tmp_path / "state"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "chatgate", "init", "--write", str(target), "--state-dir", str(state), "--agent", "openai",
         "--openai-base-url", "http://127.0.0.1:9/v1", "--openai-model", "m", "--platform", "web",
         "--no-service"],
        env=_env(tmp_path), encoding="utf-8", timeout=TIMEOUT,
    )  # fmt: skip
    try:
        child.expect(r"holding the API key \[OPENAI_API_KEY\]: ")
        child.sendline("sk-proj-abcdef0123456789")
        child.expect(r"it looks like the secret itself \(not shown\)")
        child.expect(r"Save it as OPENAI_API_KEY in .*chatgate\.env\? \(y/n\) \[y\]: ")
        child.sendline("y")
        child.expect(r"The endpoint check failed")  # nothing listens on port 9
        child.expect(r"Keep these settings anyway\? \(y/n\) \[n\]: ")
        child.sendline("y")
        child.expect(r"Write .*\? \(y/n\) \[y\]: ")
        child.sendline("y")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    assert "TELEGRAM" not in str(child.before)
    assert read_env_file(state / "chatgate.env") == {"OPENAI_API_KEY": "sk-proj-abcdef0123456789"}
    assert yaml.safe_load(target.read_text())["agent"]["openai"]["api_key_env"] == "OPENAI_API_KEY"


def test_a_scripted_init_given_a_key_for_a_variable_name_names_that_variable(tmp_path: Path) -> None:
    state = tmp_path / "state"
    done = chatgate(
        tmp_path, "init", "--yes", "--write", str(tmp_path / "chatgate.yaml"), "--state-dir", str(state),
        "--agent", "openai", "--openai-key-env", "sk-proj-abcdef0123456789", "--platform", "web",
    )  # fmt: skip
    assert done.returncode == 1
    assert f"put it in {state / 'chatgate.env'} as OPENAI_API_KEY=..." in done.stderr
    assert "sk-proj" not in done.stdout + done.stderr and "TELEGRAM" not in done.stderr
    assert not (tmp_path / "chatgate.yaml").exists()
