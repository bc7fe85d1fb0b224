"""``store.url: postgresql://…`` selects the PostgreSQL store: validated when the config loads
(the offending key named, no password in the YAML), and a real gateway runs on it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from chatgate.app.config import ConfigError, load_config
from support.postgres import DSN, pg_schema_fixture  # noqa: F401  (the pg_schema fixture)
from support.procs import FrameClient, GatewayProcess


def _error(tmp_path: Path, store: dict[str, object], env: dict[str, str] | None = None) -> str:
    path = tmp_path / "chatgate.yaml"
    path.write_text(yaml.safe_dump({"store": store}))
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        with pytest.raises(ConfigError) as err:
            load_config(path)
    finally:
        os.environ.clear()
        os.environ.update(old)
    return str(err.value)


@pytest.mark.parametrize(
    ("store", "expected"),
    [
        ({"url": "postgresql://cg:hunter2@db/cg"}, "store.url (line 2): must not contain a password"),
        ({"url": "mysql://db/chatgate"}, "store.url (line 2): must start with postgresql://"),
        ({"url": "postgresql:///chatgate"}, "store.url (line 2): names no host"),
        ({"backend": "postgres"}, "store.url is required when store.backend is postgres"),
        ({"url": "postgresql://db/x", "backend": "sqlite"}, "store.backend is sqlite; remove one of them"),
        ({"url": "postgresql://db/x", "postgres": {"schema": "Fleet-1"}}, "store.postgres.schema"),
        ({"url": "postgresql://db/x", "password_env": "CG_NO_SUCH_PW"}, "store.password_env: environment"),
    ],
)
def test_a_postgres_store_mistake_names_its_key(tmp_path, store, expected):
    assert expected in _error(tmp_path, store)


def test_a_url_alone_selects_postgres_and_the_password_comes_from_the_env_var(tmp_path, monkeypatch):
    path = tmp_path / "chatgate.yaml"
    store = {"url": "postgresql://chatgate@db:5433/fleet", "password_env": "CG_TEST_PG_PW"}
    path.write_text(yaml.safe_dump({"store": store}))
    monkeypatch.setenv("CG_TEST_PG_PW", "s3cret")
    config = load_config(path)
    assert config.store.backend == "postgres" and config.store.postgres.schema_ == "public"
    assert "s3cret" not in path.read_text()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "chatgate.app.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
async def test_a_gateway_on_postgres_answers_and_the_cli_reads_the_same_database(tmp_path, pg_schema):
    config = {"store": {"url": DSN, "postgres": {"schema": pg_schema}}, "shutdown": {"drain_seconds": 1}}
    gateway = GatewayProcess(tmp_path, config)
    await gateway.start()
    try:
        client = FrameClient(gateway.port, "chat-pg", "u1")
        await client.connect()
        await client.message("m1", "hello postgres")
        final = await client.final("m1")
        assert "hello postgres" in final["text"]
        await client.close()
        assert f"store postgres {DSN} (schema {pg_schema})" in gateway.logs()
        assert not (gateway.state_dir / "chatgate.db").exists(), "nothing went to a SQLite file"
        listed = await asyncio.to_thread(cli, "sessions", "--config", str(gateway.config_path))
        assert listed.returncode == 0, listed.stderr
        assert "chat-pg" in listed.stdout
        pairing = await asyncio.to_thread(cli, "pairing", "list", "--config", str(gateway.config_path))
        assert pairing.returncode == 0 and "No pairing codes are waiting" in pairing.stdout, pairing.stderr
        status = await asyncio.to_thread(
            cli, "status", "--config", str(gateway.config_path), "--state-dir", str(gateway.state_dir)
        )
        assert status.returncode == 0, status.stderr
        assert gateway.proc is not None
        assert "fleet: 1 other process(es) on this database" in status.stdout, status.stdout
        assert f"pid {gateway.proc.pid} (" in status.stdout and ": alive," in status.stdout
        assert "adapters: web (connected)" in status.stdout, status.stdout
    finally:
        assert await gateway.terminate() == 0
