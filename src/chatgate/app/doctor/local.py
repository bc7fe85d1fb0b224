"""The checks that need no network: each returns its ``Finding``, never raises for what it checks."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from chatgate.app.config import ConfigError, GatewayConfig
from chatgate.app.config.envfile import check_private, read_env_file
from chatgate.app.config.secrets import missing_secrets
from chatgate.app.doctor.finding import Finding
from chatgate.app.locks import is_held, read_record
from chatgate.app.netaddr import listen_tcp
from chatgate.app.store_access import database_path

MIN_FREE_MB = 200
"""Free space below this in the state dir's file system fails the disk check (``--min-free-mb``)."""


def secrets_file(path: Path, environ: MutableMapping[str, str]) -> Finding:
    """The secrets file is private and readable; its variables are loaded (the environment wins)."""
    if not path.exists():
        return Finding.ok("secrets file", f"none at {path} (the secrets come from the environment)")
    try:
        values = read_env_file(path, private=False)  # even a loose file: the other checks need it
    except ConfigError as exc:
        return Finding.fail("secrets file", str(exc), f"fix or remove {path}")
    for name, value in values.items():
        environ.setdefault(name, value)
    try:
        check_private(path)
    except ConfigError as exc:
        return Finding.fail("secrets file", str(exc).split(";")[0], f"chmod 600 {path}")
    return Finding.ok("secrets file", f"{path}: {len(values)} variable(s), mode 0600")


def secrets(config: GatewayConfig, environ: Mapping[str, str], file: Path) -> Finding:
    missing = missing_secrets(config, environ)
    if not missing:
        return Finding.ok("secrets", "every secret the config names is set")
    named = ", ".join(f"{need.env or '(no variable)'} ({need.key}: {need.what})" for need in missing)
    lines = " ".join(f"{need.env}=..." for need in missing if need.env)
    return Finding.fail("secrets", f"not set: {named}", f"add {lines} to {file} (or export them)")


def disk(state_dir: Path, min_free_mb: int) -> Finding:
    where = state_dir
    while not where.exists() and where != where.parent:
        where = where.parent  # a state dir not made yet: the file system it will be on
    free_mb = shutil.disk_usage(where).free // (1024 * 1024)
    if free_mb < min_free_mb:
        return Finding.fail(
            "disk space",
            f"{free_mb} MB free for {state_dir}, under {min_free_mb} MB",
            "free some space there, or move the state dir (--state-dir) to a larger disk",
        )
    return Finding.ok("disk space", f"{free_mb} MB free for {state_dir}")


def sqlite_database(config: GatewayConfig, state_dir: Path) -> Finding:
    path = database_path(config, state_dir)
    if not path.exists():
        return Finding.ok("database", f"none yet at {path} (made at the first start)")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            problems = [row[0] for row in conn.execute("PRAGMA integrity_check(5)")]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        problems = [str(exc)]
        version = "?"
    if problems != ["ok"]:
        return Finding.fail(
            "database",
            f"{path} is damaged: {'; '.join(problems)}",
            "stop the gateway and start it with `chatgate run --reset-state` to set it aside"
            " (or restore a backup)",
        )
    return Finding.ok("database", f"{path}: integrity ok, schema v{version}")


def postgres_database(config: GatewayConfig) -> Finding:
    import asyncio

    from chatgate.store.postgres.schema import SCHEMA_VERSION  # asyncpg: only for PostgreSQL

    async def version() -> int:
        import asyncpg

        store = config.store
        password = os.environ.get(store.password_env) if store.password_env else None
        conn = await asyncpg.connect(
            store.url, password=password, timeout=store.postgres.connect_timeout_seconds
        )
        try:
            table = f'"{store.postgres.schema_}".schema_version'
            exists = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", table)
            return int(await conn.fetchval(f"SELECT version FROM {table}") or 0) if exists else 0
        finally:
            await conn.close()

    try:
        found = asyncio.run(version())
    except (OSError, TimeoutError, ValueError) as exc:
        return Finding.fail(
            "database", f"cannot connect to PostgreSQL: {exc}", "check store.url and the server"
        )
    except Exception as exc:  # asyncpg's own errors: authentication, no such database
        return Finding.fail(
            "database", f"PostgreSQL refused: {exc}", "check store.url, the role and store.password_env"
        )
    if found > SCHEMA_VERSION:
        return Finding.fail(
            "database", f"schema v{found} is newer than this chatgate (v{SCHEMA_VERSION})", "upgrade chatgate"
        )
    return Finding.ok("database", f"PostgreSQL answers; schema v{found} (this chatgate: v{SCHEMA_VERSION})")


def lock(state_dir: Path) -> tuple[Finding, int | None]:
    """Whether a gateway runs on this state dir (its pid), and whether one could start here."""
    if state_dir.exists() and not state_dir.is_dir():
        return Finding.fail(
            "state dir", f"{state_dir} is not a directory", "move that file away or pick another --state-dir"
        ), None
    held = is_held(state_dir / "gateway.lock")
    if held:
        record = read_record(state_dir / "gateway.lock")
        who = f"pid {record.pid}" if record else "another process"
        return Finding.ok("state dir", f"{state_dir}: a gateway is running on it ({who})"), (
            record.pid if record else 0
        )
    where = state_dir if state_dir.exists() else state_dir.parent
    if where.exists() and not os.access(where, os.W_OK | os.X_OK):
        return Finding.fail(
            "state dir", f"{where} is not writable", "fix its owner or mode, or pick another --state-dir"
        ), None
    return Finding.ok("state dir", f"{state_dir}: no gateway running on it; free to start"), None


def sandbox(config: GatewayConfig, state_dir: Path) -> Finding:
    tools = config.tools
    if not tools.enabled:
        return Finding.skip("sandbox", "the shell tool is off (tools.enabled: false)")
    if tools.sandbox == "none":
        return Finding.ok("sandbox", "the shell tool runs commands unsandboxed (tools.sandbox: none)")
    from chatgate.agents.tools.sandbox import BwrapSandbox, SandboxUnavailable  # only with tools on

    workdir = Path(tools.workdir) if tools.workdir else state_dir / "workdir"
    probe = workdir if workdir.is_dir() else Path.cwd()  # made at the first start
    try:
        BwrapSandbox(probe.absolute(), tools.sandbox_network).check()
    except SandboxUnavailable as exc:
        problem, _, fix = str(exc).partition("; ")
        return Finding.fail(
            "sandbox", problem, fix or "set tools.sandbox: none to run unsandboxed on purpose"
        )
    return Finding.ok("sandbox", "bubblewrap runs a probe command")


def port(config: GatewayConfig, running: int | None) -> Finding:
    host, number = config.http.host, config.http.port
    if running is not None:
        return Finding.ok("http port", f"{host}:{number}: served by the gateway running here")
    try:
        listen_tcp(host, number, backlog=1).close()
    except OSError as exc:
        return Finding.fail(
            "http port",
            f"cannot listen on {host}:{number}: {exc.strerror}",
            "stop what listens there, or pick another port (http.port, or chatgate run --port)",
        )
    return Finding.ok("http port", f"{host}:{number} is free")


def start_problems(config: GatewayConfig, state_dir: Path, min_free_mb: int = MIN_FREE_MB) -> list[Finding]:
    """What ``chatgate run`` checks at its start beyond what it already refuses (the config, the
    secrets, the lock, the sandbox, the port): cheap and local only, logged as warnings."""
    return [finding for finding in (disk(state_dir, min_free_mb),) if finding.status == "FAIL"]
