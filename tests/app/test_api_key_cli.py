"""``chatgate api-key create|list|revoke`` as an operator runs it (subprocesses), beside a running
gateway: the token is printed once and only its hash is stored; a revoked key is refused at once."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from chatgate.domain.api_keys import hash_token
from support.procs import GatewayProcess

pytestmark = pytest.mark.slow


def chatgate(gateway: GatewayProcess, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "chatgate.app.cli", "api-key", *args]
    command += ["--config", str(gateway.config_path), "--state-dir", str(gateway.state_dir)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def created(result: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    assert result.returncode == 0, result.stderr
    match = re.search(r"cg-([0-9a-f]{12})-\S+", result.stdout)
    assert match, result.stdout
    return match.group(1), match.group(0)


async def test_keys_are_created_listed_and_revoked_beside_a_running_gateway(tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path, {"platforms": {"api": {"enabled": True}}})
    assert chatgate(gateway, "list").stdout.startswith("No API keys yet")
    first_id, first = created(chatgate(gateway, "create", "--name", "ci"))  # before the first start
    await gateway.start()
    try:
        second_id, second = created(chatgate(gateway, "create", "--name", "laptop"))  # while it runs
        listing = chatgate(gateway, "list").stdout
        assert re.search(rf"{first_id}\s+ci\s.*active", listing) and re.search(
            rf"{second_id}\s+laptop", listing
        )
        assert first not in listing and second not in listing
        db = sqlite3.connect(gateway.state_dir / "chatgate.db", timeout=30)
        try:
            stored = db.execute("SELECT token_hash FROM api_keys ORDER BY created_at").fetchall()
        finally:
            db.close()
        assert stored == [(hash_token(first),), (hash_token(second),)]
        url = f"http://127.0.0.1:{gateway.port}/v1/models"
        async with httpx.AsyncClient(timeout=30) as http:
            assert (await http.get(url, headers={"Authorization": f"Bearer {second}"})).status_code == 200
            revoked = chatgate(gateway, "revoke", second_id)
            assert revoked.returncode == 0 and "Revoked" in revoked.stdout
            refused = await http.get(url, headers={"Authorization": f"Bearer {second}"})
            assert refused.status_code == 401 and "revoked" in refused.json()["error"]["message"]
            assert (await http.get(url, headers={"Authorization": f"Bearer {first}"})).status_code == 200
        assert re.search(rf"{second_id}\s+laptop\s.*revoked", chatgate(gateway, "list").stdout)
        again = chatgate(gateway, "revoke", second_id)
        assert again.returncode == 1 and "no active API key" in again.stderr
        bad = chatgate(gateway, "revoke", "not-an-id")
        assert bad.returncode == 1 and "12 hex digits" in bad.stderr
    finally:
        await gateway.terminate()


def test_create_says_when_the_config_has_the_api_off(tmp_path: Path) -> None:
    config = tmp_path / "chatgate.yaml"
    config.write_text(yaml.safe_dump({}))
    command = [sys.executable, "-m", "chatgate.app.cli", "api-key", "create"]
    command += ["--config", str(config), "--state-dir", str(tmp_path / "state")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "platforms.api.enabled: true" in result.stdout
