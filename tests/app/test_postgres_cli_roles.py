"""``chatgate api-key`` and ``chatgate schedules`` on a PostgreSQL config work on the fleet's
schema (what every gateway of the fleet reads), not on a SQLite file no gateway opens."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import yaml

from chatgate.domain.api_keys import hash_token
from chatgate.domain.schedules import Schedule, ScheduleTarget
from chatgate.domain.source import Source
from chatgate.store.postgres import PostgresStore
from contract.kit import T0
from support.postgres import DSN, pg_schema_fixture  # noqa: F401  (the pg_schema fixture)


def chatgate(tmp_path: Path, schema: str, *args: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "chatgate.yaml"
    if not config.exists():
        store = {"url": DSN, "postgres": {"schema": schema}}
        config.write_text(yaml.safe_dump({"store": store, "platforms": {"api": {"enabled": True}}}))
    command = [sys.executable, "-m", "chatgate.app.cli", *args, "--config", str(config)]
    command += ["--state-dir", str(tmp_path / "state")]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


async def run(tmp_path: Path, schema: str, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(chatgate, tmp_path, schema, *args)


async def test_api_keys_are_created_listed_and_revoked_in_the_fleets_schema(tmp_path, pg_schema):
    made = await run(tmp_path, pg_schema, "api-key", "create", "--name", "ci")
    assert made.returncode == 0, made.stderr
    match = re.search(r"cg-([0-9a-f]{12})-\S+", made.stdout)
    assert match, made.stdout
    key_id, token = match.group(1), match.group(0)
    store = PostgresStore(DSN, schema=pg_schema)
    await store.open()
    try:
        found = await store.api_key_by_hash(hash_token(token))
        assert found is not None and found.key_id == key_id and found.active
        listing = await run(tmp_path, pg_schema, "api-key", "list")
        assert re.search(rf"{key_id}\s+ci\s.*active", listing.stdout) and token not in listing.stdout
        revoked = await run(tmp_path, pg_schema, "api-key", "revoke", key_id)
        assert revoked.returncode == 0 and "Revoked" in revoked.stdout
        gone = await store.api_key_by_hash(hash_token(token))
        assert gone is not None and not gone.active
        again = await run(tmp_path, pg_schema, "api-key", "revoke", key_id)
        assert again.returncode == 1 and "no active API key" in again.stderr
    finally:
        await store.close()
    assert not (tmp_path / "state" / "chatgate.db").exists(), "no SQLite file was written"


async def test_schedules_are_listed_paused_and_deleted_in_the_fleets_schema(tmp_path, pg_schema):
    store = PostgresStore(DSN, schema=pg_schema)
    await store.open()
    try:
        target = ScheduleTarget(Source("webchat", "c1", user_id="u1"), "k1")
        await store.save_schedule(Schedule("s1", "every", "60", "stand up", target, "chat", T0 + 60, T0))
        listing = await run(tmp_path, pg_schema, "schedules", "list")
        assert listing.returncode == 0 and "s1" in listing.stdout and "session k1" in listing.stdout
        paused = await run(tmp_path, pg_schema, "schedules", "pause", "s1")
        assert paused.returncode == 0, paused.stderr
        stored = await store.get_schedule("s1")
        assert stored is not None and stored.paused
        deleted = await run(tmp_path, pg_schema, "schedules", "delete", "s1")
        assert deleted.returncode == 0 and await store.get_schedule("s1") is None
        missing = await run(tmp_path, pg_schema, "schedules", "resume", "s1")
        assert missing.returncode == 1 and "no schedule" in missing.stderr
    finally:
        await store.close()
