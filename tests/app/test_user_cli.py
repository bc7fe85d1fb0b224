"""``chatgate user add|token|list|revoke`` as an operator runs it (subprocesses), beside a running
gateway with ``platforms.web.auth: accounts``; on a PostgreSQL config, in the fleet's schema.
Tokens and passwords are printed or typed once and never stored in clear."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from chatgate.domain.accounts import hash_secret
from chatgate.store.postgres import PostgresStore
from support.postgres import DSN, pg_schema_fixture  # noqa: F401  (the pg_schema fixture)
from support.procs import GatewayProcess

pytestmark = pytest.mark.slow
ACCOUNTS = {"platforms": {"web": {"auth": "accounts"}}}


def user(config: Path, state_dir: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "chatgate.app.cli", "user", *args, "--config", str(config)]
    command += ["--state-dir", str(state_dir)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, input=stdin)


def token_of(result: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    assert result.returncode == 0, result.stderr
    match = re.search(r"cgu-([0-9a-f]{12})-\S+", result.stdout)
    assert match, result.stdout
    return match.group(1), match.group(0)


async def test_users_are_added_listed_and_revoked_beside_a_running_gateway(tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path, ACCOUNTS)
    cli = lambda *a, stdin="": user(gateway.config_path, gateway.state_dir, *a, stdin=stdin)  # noqa: E731
    assert cli("list").stdout.startswith("No users yet")
    first_id, first = token_of(cli("add", "ann", "--password", stdin="correct horse\n"))  # before the start
    await gateway.start()
    try:
        _, root_token = token_of(cli("add", "root", "--admin"))  # while it runs
        second_id, second = token_of(cli("token", "ann"))
        assert cli("add", "ann").returncode == 1
        bad = cli("add", "Not A Name")
        assert bad.returncode == 2 and "is not a user name" in bad.stderr
        listing = cli("list").stdout
        assert re.search(rf"ann\s+[0-9a-f]{{12}}\s+user\s.*active\s+{first_id}, {second_id}", listing), (
            listing
        )
        assert re.search(r"root\s+[0-9a-f]{12}\s+admin\s", listing) and first not in listing

        base = f"http://127.0.0.1:{gateway.port}"
        async with httpx.AsyncClient(base_url=base, timeout=30, headers={"Origin": base}) as http:
            for body in ({"token": first}, {"token": second}, {"name": "ann", "password": "correct horse"}):
                assert (await http.post("/api/signin", json=body)).status_code == 200, body
            revoked = cli("revoke", first_id)
            assert revoked.returncode == 0 and "Revoked sign-in token" in revoked.stdout
            assert (await http.post("/api/signin", json={"token": first})).status_code == 401
            assert (await http.post("/api/signin", json={"token": second})).status_code == 200
            gone = cli("revoke", "ann")
            assert gone.returncode == 0 and "Revoked user ann" in gone.stdout
            for body in ({"token": second}, {"name": "ann", "password": "correct horse"}):
                assert (await http.post("/api/signin", json=body)).status_code == 401, body
            assert (await http.post("/api/signin", json={"token": root_token})).status_code == 200
        again = cli("revoke", "ann")
        assert again.returncode == 1 and "no active user or token" in again.stderr
        assert re.search(r"ann\s+[0-9a-f]{12}\s+user\s.*revoked", cli("list").stdout)
    finally:
        await gateway.terminate()
    stored = b"".join(p.read_bytes() for p in gateway.state_dir.glob("chatgate.db*"))
    for secret in (first, second, root_token, "correct horse"):
        assert secret.encode() not in stored, "a secret is kept in clear"
    assert hash_secret(first).encode() in stored


async def test_accounts_with_no_user_refuse_to_start_and_say_how_to_add_one(tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path, ACCOUNTS)
    await gateway.start(wait=False)
    assert gateway.proc is not None
    assert await asyncio.wait_for(gateway.proc.wait(), 60) == 78
    assert "platforms.web.auth" in gateway.logs() and "chatgate user add" in gateway.logs()


async def test_users_on_a_postgres_config_are_in_the_fleets_schema(tmp_path: Path, pg_schema: str) -> None:
    config = tmp_path / "chatgate.yaml"
    config.write_text(yaml.safe_dump({"store": {"url": DSN, "postgres": {"schema": pg_schema}}, **ACCOUNTS}))
    state = tmp_path / "state"
    token_id, token = token_of(await asyncio.to_thread(user, config, state, "add", "ann", "--admin"))
    store = PostgresStore(DSN, schema=pg_schema)
    await store.open()
    try:
        found = await store.sign_in_token_by_hash(hash_secret(token))
        assert found is not None and found[1].name == "ann" and found[1].role == "admin"
        listing = await asyncio.to_thread(user, config, state, "list")
        assert re.search(rf"ann\s+[0-9a-f]{{12}}\s+admin\s.*{token_id}", listing.stdout)
        revoked = await asyncio.to_thread(user, config, state, "revoke", "ann")
        assert revoked.returncode == 0
        (account, _) = await store.account_by_name("ann") or (None, None)
        assert account is not None and not account.active
    finally:
        await store.close()
    assert not (state / "chatgate.db").exists(), "nothing was written to a SQLite file"
