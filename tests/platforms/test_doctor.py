"""``chatgate doctor``, run as a user runs it, against a site whose every check passes: the
Telegram Bot API double (getMe), the fake OpenAI server (a one-token completion), a real
SQLite file, bubblewrap, a free port. Then each check is broken alone: it is the only one
that fails, its line names it and its fix, and the exit code is 1."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from telegram_double import TOKEN, BotApiDouble

from agents.fake_openai_server import API_KEY, Fail, FakeOpenAIServer, Reply, running
from chatgate.app.config.envfile import save_secrets
from chatgate.app.locks import LockRecord, runtime_lock
from support.postgres import pg_schema_fixture  # noqa: F401  (the pg_schema fixture)
from support.procs import free_port

TG_ENV, KEY_ENV = "DOCTOR_TG_TOKEN", "DOCTOR_OPENAI_KEY"


@dataclass
class Site:
    root: Path
    config: Path
    state: Path
    port: int
    env: dict[str, str] = field(default_factory=dict)

    @property
    def secrets(self) -> Path:
        return self.state / "chatgate.env"


@pytest.fixture
def openai() -> Iterator[FakeOpenAIServer]:
    with running() as server:
        server.script(Reply("p"))
        yield server


@pytest.fixture
def site(tmp_path: Path, double: BotApiDouble, openai: FakeOpenAIServer) -> Site:
    state, port = tmp_path / "state", free_port()
    config = tmp_path / "chatgate.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "agent": {
                    "kind": "openai",
                    "openai": {"base_url": openai.base_url, "model": "fake-model", "api_key_env": KEY_ENV},
                },
                "platforms": {"telegram": {"enabled": True, "token_env": TG_ENV, "api_base": double.base}},
                "tools": {"enabled": True, "sandbox": "bwrap"},
                "http": {"port": port},
            }
        )
    )
    save_secrets(state / "chatgate.env", {TG_ENV: TOKEN, KEY_ENV: API_KEY})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATGATE_", "DBUS_"))}
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    return Site(tmp_path, config, state, port, env)


async def doctor(site: Site, *args: str) -> tuple[int, dict[str, tuple[str, str]]]:
    """Its exit code, and each line's status and text by check name."""
    argv = [sys.executable, "-m", "chatgate", "doctor", "--config", str(site.config)]
    argv += ["--state-dir", str(site.state), *args]
    # the Bot API double serves on this test's loop: the command runs in a thread
    done = await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, env=site.env, timeout=120
    )
    assert not done.stderr, done.stderr
    lines: dict[str, tuple[str, str]] = {}
    for line in done.stdout.splitlines():
        status, _, rest = line.partition("  ")
        if status.strip() in ("ok", "FAIL", "skip"):
            check = rest.strip().partition("  ")[0]
            lines[check.strip()] = (status.strip(), line)
    return done.returncode, lines


def failing(lines: dict[str, tuple[str, str]]) -> set[str]:
    return {check for check, (status, _) in lines.items() if status == "FAIL"}


async def test_every_check_passes_on_a_working_site(
    site: Site, double: BotApiDouble, openai: FakeOpenAIServer
) -> None:
    code, lines = await doctor(site)
    assert code == 0 and failing(lines) == set(), lines
    assert set(lines) == {
        "secrets file", "config", "secrets", "platform telegram", "model", "disk space", "database",
        "state dir", "sandbox", "http port",
    }  # fmt: skip
    assert any(call == "getMe" for call, _ in double.calls)  # the credential was proven live
    assert openai.requests[-1].body["max_tokens"] == 1  # a real completion, one token
    assert TOKEN not in str(lines) and API_KEY not in str(lines)


def _break_config(site: Site) -> None:
    site.config.write_text("agent:\n  kind: nope\n")


def _loose_secrets(site: Site) -> None:
    site.secrets.chmod(0o644)


def _missing_secret(site: Site) -> None:
    site.secrets.unlink()
    save_secrets(site.secrets, {KEY_ENV: API_KEY})


def _refused_token(site: Site) -> None:
    save_secrets(site.secrets, {TG_ENV: "123:not-the-token"})


def _damaged_database(site: Site) -> None:
    (site.state / "chatgate.db").write_bytes(b"this is not a database" * 200)


def _state_dir_is_a_file(site: Site) -> None:
    site.secrets.unlink()
    site.state.rmdir()
    site.state.write_text("a file where the state dir should be")
    site.env.update({TG_ENV: TOKEN, KEY_ENV: API_KEY})


def _no_bwrap(site: Site) -> None:
    empty = site.root / "empty-path"
    empty.mkdir()
    site.env["PATH"] = str(empty)


BREAKS = {
    "config": (_break_config, "agent.kind", "correct that key"),
    "secrets file": (_loose_secrets, "mode 644", "chmod 600"),
    "secrets": (_missing_secret, TG_ENV, f"add {TG_ENV}=... to"),
    "platform telegram": (_refused_token, "refused the credential", "docs/platforms/telegram.md"),
    "database": (_damaged_database, "is damaged", "--reset-state"),
    "state dir": (_state_dir_is_a_file, "is not a directory", "another --state-dir"),
    "sandbox": (_no_bwrap, "bwrap", "bubblewrap"),
}


@pytest.mark.parametrize("check", list(BREAKS))
async def test_each_check_broken_alone_fails_alone_naming_itself_and_its_fix(site: Site, check: str) -> None:
    breaks, says, fix = BREAKS[check]
    breaks(site)
    code, lines = await doctor(site)
    assert code == 1
    assert failing(lines) == {check}, lines
    line = lines[check][1]
    assert says in line and "fix: " in line and fix in line.split("fix: ", 1)[1], line


async def test_a_model_endpoint_that_refuses_fails_the_model_check_alone(
    site: Site, openai: FakeOpenAIServer
) -> None:
    openai.script(Fail(401, "Incorrect API key provided", "invalid_request_error"))
    code, lines = await doctor(site)
    assert code == 1 and failing(lines) == {"model"}, lines
    assert (
        "refused the credential (HTTP 401)" in lines["model"][1]
        and "fix: check base_url" in lines["model"][1]
    )


async def test_too_little_disk_space_fails_the_disk_check_alone(site: Site) -> None:
    code, lines = await doctor(site, "--min-free-mb", str(10**12))
    assert code == 1 and failing(lines) == {"disk space"}, lines
    assert "fix: free some space" in lines["disk space"][1]


async def test_a_port_in_use_fails_the_port_check_alone(site: Site) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", site.port))
        taken.listen()
        code, lines = await doctor(site)
    assert code == 1 and failing(lines) == {"http port"}, lines
    assert (
        f"127.0.0.1:{site.port}" in lines["http port"][1]
        and "fix: stop what listens" in lines["http port"][1]
    )


async def test_a_gateway_running_on_the_state_dir_is_named_and_its_port_is_not_a_failure(site: Site) -> None:
    lock = runtime_lock(site.state)
    lock.acquire(LockRecord.for_this_process())
    try:
        with socket.socket() as taken:  # the running gateway's port
            taken.bind(("127.0.0.1", site.port))
            taken.listen()
            code, lines = await doctor(site, "--offline")
    finally:
        lock.release()
    assert code == 0, lines
    assert f"a gateway is running on it (pid {os.getpid()})" in lines["state dir"][1]
    assert "served by the gateway running here" in lines["http port"][1]
    assert lines["platforms, model"][0] == "skip"


def test_the_gateways_start_checks_are_the_cheap_local_ones_and_name_their_fix(tmp_path: Path) -> None:
    from chatgate.app.config import load_config
    from chatgate.app.doctor.local import start_problems

    config = load_config(None, need_secrets=False)
    assert start_problems(config, tmp_path) == []
    (problem,) = start_problems(config, tmp_path, min_free_mb=10**12)
    assert problem.check == "disk space" and "fix: free some space" in problem.line()


@pytest.mark.parametrize("secret", ["relay-doctor-secret", "not-the-secret"])
async def test_the_relay_is_checked_with_a_hello_and_a_wrong_secret_fails_it_alone(
    tmp_path: Path, secret: str
) -> None:
    from relaysim import RelaySimulator

    sim = RelaySimulator(
        tmp_path / "relay.db", {"gw-doc": ["relay-doctor-secret"]}, [{"platform": "discord"}]
    )
    await sim.start()
    try:
        config, state = tmp_path / "chatgate.yaml", tmp_path / "state"
        relay = {
            "enabled": True, "url": sim.base_url, "gateway_id": "gw-doc", "secret_env": "DOCTOR_RELAY_SECRET",
            "platforms": [{"platform": "discord", "bot_id": "bot1", "allow_all": True}],
        }  # fmt: skip
        config.write_text(yaml.safe_dump({"platforms": {"relay": relay}, "http": {"port": free_port()}}))
        save_secrets(state / "chatgate.env", {"DOCTOR_RELAY_SECRET": secret})
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATGATE_", "DBUS_"))}
        code, lines = await doctor(Site(tmp_path, config, state, 0, env))
    finally:
        await sim.stop()
    if secret == "relay-doctor-secret":
        assert code == 0, lines
        assert "answered hello for discord" in lines["platform relay"][1]
    else:
        assert code == 1 and failing(lines) == {"platform relay"}, lines
        assert "refused this gateway id or secret" in lines["platform relay"][1]


async def _platform_alone(tmp_path: Path, name: str, section: dict[str, Any], secrets: dict[str, str]) -> Any:
    config, state = tmp_path / "chatgate.yaml", tmp_path / "state"
    platforms = {"web": {"enabled": False}, name: {"enabled": True, **section}}
    config.write_text(yaml.safe_dump({"platforms": platforms, "http": {"port": free_port()}}))
    save_secrets(state / "chatgate.env", secrets)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATGATE_", "DBUS_"))}
    return await doctor(Site(tmp_path, config, state, 0, env))


@pytest.mark.parametrize("good", [True, False])
async def test_discord_is_checked_with_users_me(tmp_path: Path, good: bool) -> None:
    from discord_fake.server import FakeDiscord
    from discord_fake.state import TOKEN as DISCORD_TOKEN

    fake = FakeDiscord()
    await fake.start()
    try:
        section = {"token_env": "DOCTOR_DISCORD", "api_base": fake.base + "/api/v10", "allow_all": True}
        token = DISCORD_TOKEN if good else "not-the-token"
        code, lines = await _platform_alone(tmp_path, "discord", section, {"DOCTOR_DISCORD": token})
    finally:
        await fake.stop()
    assert failing(lines) == (set() if good else {"platform discord"}), lines
    assert code == (0 if good else 1)
    said = lines["platform discord"][1]
    assert ("the token belongs to the bot" in said) if good else ("refused the credential (HTTP 401)" in said)


@pytest.mark.parametrize("good", [True, False])
async def test_slack_is_checked_with_auth_test(tmp_path: Path, fake_slack: Any, good: bool) -> None:
    from slack_fake.payloads import APP_TOKEN, BOT_TOKEN

    section = {
        "bot_token_env": "DOCTOR_SLACK_BOT",
        "app_token_env": "DOCTOR_SLACK_APP",
        "api_base": fake_slack.api_base,
        "allow_all": True,
    }
    secrets = {"DOCTOR_SLACK_BOT": BOT_TOKEN if good else "xoxb-not-the-token", "DOCTOR_SLACK_APP": APP_TOKEN}
    code, lines = await _platform_alone(tmp_path, "slack", section, secrets)
    assert failing(lines) == (set() if good else {"platform slack"}), lines
    assert code == (0 if good else 1)
    said = lines["platform slack"][1]
    assert ("the token belongs to the bot" in said) if good else ("invalid_auth" in said)


async def test_the_relay_hello_is_not_made_beside_a_gateway_holding_the_connection(tmp_path: Path) -> None:
    relay = {
        "url": "ws://127.0.0.1:9", "gateway_id": "gw-doc", "secret_env": "DOCTOR_RELAY_SECRET",
        "platforms": [{"platform": "discord", "bot_id": "bot1"}],
    }  # fmt: skip
    lock = runtime_lock(tmp_path / "state")
    lock.acquire(LockRecord.for_this_process())
    try:
        code, lines = await _platform_alone(tmp_path, "relay", relay, {"DOCTOR_RELAY_SECRET": "s"})
    finally:
        lock.release()
    assert code == 0, lines
    assert lines["platform relay"][0] == "skip" and "holds its connection" in lines["platform relay"][1]


async def test_on_postgresql_the_database_check_connects_and_reads_the_schema_version(
    tmp_path: Path, pg_schema: str
) -> None:
    from support.postgres import DSN, sql

    await sql(f'CREATE SCHEMA "{pg_schema}"')
    await sql(f'CREATE TABLE "{pg_schema}".schema_version (version INTEGER NOT NULL)')
    await sql(f'INSERT INTO "{pg_schema}".schema_version VALUES (1)')
    config, state = tmp_path / "chatgate.yaml", tmp_path / "state"
    store = {"url": DSN, "postgres": {"schema": pg_schema}}
    config.write_text(yaml.safe_dump({"store": store, "http": {"port": free_port()}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATGATE_", "DBUS_"))}
    code, lines = await doctor(Site(tmp_path, config, state, 0, env))
    assert code == 0 and "PostgreSQL answers; schema v1 " in lines["database"][1], lines

    from chatgate.store.postgres.schema import SCHEMA_VERSION

    await sql(f'UPDATE "{pg_schema}".schema_version SET version = $1', SCHEMA_VERSION + 1)
    code, lines = await doctor(Site(tmp_path, config, state, 0, env))
    assert code == 1 and failing(lines) == {"database"}, lines
    assert (
        "newer than this chatgate" in lines["database"][1] and "fix: upgrade chatgate" in lines["database"][1]
    )

    store["url"] = DSN.rsplit("/", 1)[0] + "/no_such_database_for_doctor"
    config.write_text(yaml.safe_dump({"store": store, "http": {"port": free_port()}}))
    code, lines = await doctor(Site(tmp_path, config, state, 0, env))
    assert code == 1 and failing(lines) == {"database"}, lines
    assert (
        "no_such_database_for_doctor" in lines["database"][1]
        and "fix: check store.url" in lines["database"][1]
    )
