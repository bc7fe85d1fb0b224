"""One process per bot token: a second gateway (another state dir) refuses Telegram, naming the holder.

Also: the token never appears in logs, errors, status or the lock file's name.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from telegram_double import TOKEN, TOKEN_ENV, BotApiDouble, Gateways, User, echo_of, private, telegram_config

from chatgate.app.startup import CredentialInUse
from support.procs import GatewayProcess

pytestmark = pytest.mark.slow
ADA = User(9001, "Ada")
SECRET_PART = TOKEN.split(":", 1)[1]


def _http_status(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=10) as resp:
        data: dict[str, Any] = json.load(resp)
    return data


def _cli_status(state_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    command = [
        sys.executable,
        "-m",
        "chatgate.app.cli",
        "status",
        "--json",
        "--state-dir",
        str(state_dir),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)


def _config(double: BotApiDouble, locks: Path) -> dict[str, Any]:
    return {
        "agent": {"echo": {"chunk_delay_ms": 0}},
        "platforms": {
            "web": {"enabled": False},
            "telegram": {
                "enabled": True,
                "token_env": TOKEN_ENV,
                "allow_users": [str(ADA.id)],
                "api_base": double.base,
                "poll_timeout_seconds": 5,
            },
        },
        "locks": {"credential_dir": str(locks)},
    }


async def test_a_second_gateway_with_the_same_bot_token_refuses_telegram_naming_the_holder(
    double: BotApiDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    locks = tmp_path / "locks"
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = GatewayProcess(tmp_path / "one", _config(double, locks))
    second = GatewayProcess(tmp_path / "two", _config(double, locks))
    await first.start()
    try:
        assert first.proc is not None
        await second.start(wait=False)
        assert second.proc is not None
        code = await second.proc.wait()
        refused = second.logs()
        assert code == 78, refused  # EX_CONFIG, like the runtime lock: a restart will not fix it
        assert f"pid {first.proc.pid}" in refused, refused
        assert "telegram" in refused and "already in use" in refused
        assert str(first.state_dir) in refused
        assert SECRET_PART not in refused

        # The first gateway is untouched and answers.
        await double.push_message(private(ADA), ADA, "still yours?")
        await double.wait_for(lambda: len(double.view(ADA.id)) == 1, timeout=60)
        assert double.view(ADA.id)[0].text == echo_of("still yours?")
        assert not (second.state_dir / "chatgate.db").exists(), "the refused gateway touched its store"
        status = await asyncio.to_thread(_http_status, first.port)
        assert status["adapters"]["telegram"]["connected"] is True
        assert SECRET_PART not in json.dumps(status)
        cli = await asyncio.to_thread(_cli_status, first.state_dir)
        assert cli.returncode == 0 and "telegram" in cli.stdout
        assert SECRET_PART not in cli.stdout + cli.stderr
    finally:
        assert await first.terminate() == 0

    lock_files = list(locks.iterdir())
    assert len(lock_files) == 1
    assert SECRET_PART not in lock_files[0].name and SECRET_PART not in lock_files[0].read_text()
    assert SECRET_PART not in first.logs()


async def test_the_credential_lock_is_held_while_running_and_released_at_stop(
    double: BotApiDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    gateways = Gateways(tmp_path)
    config = telegram_config(double, tmp_path, telegram={"allow_users": [ADA.id]})
    try:
        first = await gateways.start(config, state="one")
        with pytest.raises(CredentialInUse) as refused:
            await gateways.start(config, state="two")
        assert f"pid {os.getpid()}" in str(refused.value) and SECRET_PART not in str(refused.value)
        await gateways.stop(first)
        second = await gateways.start(config, state="two")
        await double.push_message(private(ADA), ADA, "new owner")
        await double.wait_for(lambda: len(double.view(ADA.id)) == 1)
        assert "telegram" in second.adapters and second.adapters["telegram"].state().connected
    finally:
        await gateways.stop_all()
