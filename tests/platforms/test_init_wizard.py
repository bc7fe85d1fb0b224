"""``chatgate init`` driven through a real pseudo-terminal (pexpect), end to end: echo + web +
Telegram against the Bot API double (a real HTTP server: init's getMe check talks to it), then
a real ``chatgate run`` on the file it wrote answers over the web chat and over Telegram.

The gateway runs the written file untouched; the only addition is the test's own
credential-lock directory, given the way an operator would: a ``CHATGATE_*`` variable.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pexpect
import pytest
import yaml
from telegram_double import BOT_USERNAME, TOKEN, TOKEN_ENV, BotApiDouble

from chatgate.app.config import load_config
from chatgate.domain.pairing import CODE_ALPHABET
from support.procs import GatewayProcess
from support.web_harness import WebClient

pytestmark = pytest.mark.slow
TIMEOUT = 60


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATGATE_", "DBUS_"))}
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"), TERM="dumb")
    env[TOKEN_ENV] = TOKEN
    return env


def drive_interactive_init(tmp_path: Path, target: Path, api_base: str) -> str:
    """Answer every question as a new user would; returns the whole transcript."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "chatgate", "init", "--write", str(target), "--telegram-api-base", api_base],
        env=_env(tmp_path), cwd=str(tmp_path), encoding="utf-8", timeout=TIMEOUT,
    )  # fmt: skip
    try:
        child.expect(r"Agent: echo .*\[echo\]: ")
        child.sendline("echo")
        child.expect(r"Platforms, comma-separated .*\[web\]: ")
        child.sendline("web, telegram")
        child.expect(r"holding the bot token \[TELEGRAM_BOT_TOKEN\]: ")
        child.sendline(TOKEN_ENV)
        child.expect(rf"the token belongs to @{BOT_USERNAME}\. Chat with it: https://t\.me/{BOT_USERNAME}")
        child.expect(r"pairing \(a stranger gets a code you approve\) .*\[pairing\]: ")
        child.sendline("")
        child.expect(r"User ids let in without a code .*: ")
        child.sendline("")
        child.expect(r"Write .*chatgate\.yaml\? \(y/n\) \[y\]: ")
        child.sendline("y")
        child.expect(r"Install a user service .*\[n\]: ")
        child.sendline("n")
        child.expect(r"Start it: ")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    return str(child.before)


async def test_init_through_a_terminal_writes_a_config_the_gateway_answers_on_web_and_telegram(
    double: BotApiDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "site" / "chatgate.yaml"
    target.parent.mkdir()
    await asyncio.to_thread(drive_interactive_init, tmp_path, target, double.base)
    assert any(call == "getMe" for call, _ in double.calls)  # the token was checked against the platform
    text = target.read_text()
    assert text.startswith("# chatgate configuration, written by `chatgate init`")
    assert TOKEN not in text  # the variable's name is written, never its value
    written = yaml.safe_load(text)
    assert written["platforms"]["telegram"] == {
        "enabled": True, "token_env": TOKEN_ENV, "pairing": True, "allow_users": [], "api_base": double.base,
    }  # fmt: skip
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    assert load_config(target).agent.kind == "echo"

    (tmp_path / "run").mkdir()
    gateway = GatewayProcess(tmp_path / "run", {})
    gateway.config_path = target  # run the written file, not the harness's
    locks = f"CHATGATE_LOCKS__CREDENTIAL_DIR={tmp_path / 'locks'}"
    await gateway.start(launcher=["env", locks, sys.executable, "-m", "chatgate.app.cli"])
    try:
        client = await WebClient.connect(gateway.port)
        await client.hello("first-chat")
        frames = await client.ask("m1", "hello from init")
        assert frames[-1]["text"] == "echo: hello from init"
        await client.close()
        assert re.search(rf"\b[{CODE_ALPHABET}]{{8}}\b", await double.pairing_code_for_a_stranger())
    finally:
        await gateway.kill()


def test_a_rerun_offers_the_current_values_and_keeps_keys_it_does_not_ask_about(tmp_path: Path) -> None:
    target = tmp_path / "chatgate.yaml"
    target.write_text(
        yaml.safe_dump(
            {
                "agent": {"kind": "echo", "history_limit": 7},
                "platforms": {"telegram": {"enabled": True, "token_env": "MY_BOT", "allow_users": ["42"]}},
                "tools": {"enabled": True},
            }
        )
    )
    env = _env(tmp_path)
    env.pop(TOKEN_ENV)
    child = pexpect.spawn(
        sys.executable, ["-m", "chatgate", "init", "--write", str(target)],
        env=env, encoding="utf-8", timeout=TIMEOUT,
    )  # fmt: skip
    try:
        child.expect(r"current values are the defaults")
        child.expect(r"\[echo\]: ")
        child.sendline("")
        child.expect(r"\[web,telegram\]: ")
        child.sendline("telegram")
        child.expect(r"\[MY_BOT\]: ")
        child.sendline("")
        child.expect(r"Paste the token from @BotFather \(hidden; saved as MY_BOT in .*chatgate\.env\)")
        child.sendline("")
        child.expect(r"Skipped: put MY_BOT=")
        child.expect(r"\[allowlist\]: ")
        child.sendline("")
        child.expect(r"User ids allowed \[42\]: ")
        child.sendline("42, 43")
        child.expect(r"\(y/n\) \[y\]: ")
        child.sendline("")
        child.expect(r"\[n\]: ")
        child.sendline("")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    data = yaml.safe_load(target.read_text())
    assert data["agent"] == {"kind": "echo", "history_limit": 7}
    assert data["tools"] == {"enabled": True}
    assert data["platforms"]["web"] == {"enabled": False}
    telegram = data["platforms"]["telegram"]
    assert (telegram["token_env"], telegram["pairing"], telegram["allow_users"]) == (
        "MY_BOT",
        False,
        ["42", "43"],
    )


def test_flags_with_yes_ask_nothing_and_a_refused_token_writes_nothing(tmp_path: Path) -> None:
    import subprocess

    target = tmp_path / "chatgate.yaml"
    base = [sys.executable, "-m", "chatgate", "init", "--write", str(target), "--yes"]
    env = _env(tmp_path)
    ok = subprocess.run(
        [*base, "--agent", "echo", "--platform", "web", "--platform", "relay", "--relay-url", "wss://relay.test",
         "--relay-gateway-id", "gw1", "--relay-platform", "discord", "--relay-bot-id", "B1",
         "--allow", "allowlist", "--allow-user", "7"],
        env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    relay = yaml.safe_load(target.read_text())["platforms"]["relay"]
    assert relay["enabled"] is True and relay["platforms"] == [
        {"platform": "discord", "bot_id": "B1", "pairing": False, "allow_users": ["7"]}
    ]
    native = subprocess.run(
        [*base, "--write", str(tmp_path / "native.yaml"), "--platform", "discord", "--discord-token-env",
         "MY_DISCORD_TOKEN", "--allow", "pairing"],
        env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert native.returncode == 0, native.stderr
    assert "Connector URL" not in native.stdout  # Discord is native: no connector is asked for
    written = yaml.safe_load((tmp_path / "native.yaml").read_text())["platforms"]
    assert "relay" not in written
    discord = written["discord"]
    assert discord == {"enabled": True, "token_env": "MY_DISCORD_TOKEN", "pairing": True, "allow_users": []}
    before = target.read_text()
    env[TOKEN_ENV] = "123:not-the-token"
    bad = subprocess.run(
        [*base, "--platform", "telegram", "--telegram-token-env", TOKEN_ENV,
         "--telegram-api-base", "http://127.0.0.1:9"],
        env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert bad.returncode == 1 and "did not pass its check" in bad.stderr
    assert "not-the-token" not in bad.stdout + bad.stderr
    assert target.read_text() == before
    pasted = subprocess.run(
        [*base, "--platform", "telegram", "--telegram-token-env", TOKEN],
        env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert pasted.returncode == 1 and TOKEN not in pasted.stdout + pasted.stderr
    assert target.read_text() == before
