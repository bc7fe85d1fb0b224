"""Operator commands: ``status``, ``stop`` and ``config check``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from chatgate.app.config import GatewayConfig, load_config
from chatgate.app.config.secrets import missing_secrets
from chatgate.app.locks import is_held, read_record, runtime_lock
from chatgate.app.replace import stop_gateway

EX_NOT_RUNNING = 3  # LSB: "program is not running"


def _live_status(http: str, timeout: float = 3.0) -> dict[str, Any] | None:
    host, _, port = http.rpartition(":")
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    url = f"http://[{host}]:{port}/status" if ":" in host else f"http://{host}:{port}/status"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            data: dict[str, Any] = json.load(resp)
            return data
    except (OSError, urllib.error.URLError, ValueError):
        return None


def gather_status(state_dir: Path) -> dict[str, Any]:
    path = runtime_lock(state_dir).path
    record = read_record(path)
    if not is_held(path) or record is None:
        return {"running": False, "state_dir": str(state_dir)}
    info: dict[str, Any] = {
        "running": True,
        "pid": record.pid,
        "version": record.version,
        "state_dir": str(state_dir),
        "uptime_seconds": round(time.time() - record.started_at, 1),
    }
    http = record.extra.get("http")
    live = _live_status(http) if isinstance(http, str) else None
    if live is None:
        info["detail"] = "running, but its HTTP status endpoint did not answer (starting or stuck?)"
    else:
        info.update(live)
    return info


def _print_status(info: dict[str, Any]) -> None:
    if not info["running"]:
        print(f"chatgate is not running (state dir {info['state_dir']})")
        return
    print(f"chatgate {info.get('version', '?')} is running: pid {info['pid']}, up {info['uptime_seconds']}s")
    rows: list[tuple[str, str]] = [("state dir", str(info["state_dir"]))]
    if "http" in info:
        rows.append(("http", f"http://{info['http']}/"))
    for name, adapter in info.get("adapters", {}).items():
        state = "connected" if adapter["connected"] else "DISCONNECTED"
        rows.append((f"adapter {name}", f"{state} {adapter.get('detail', '')}".rstrip()))
    for name, server in info.get("mcp_servers", {}).items():
        state = "connected" if server["connected"] else "DISCONNECTED"
        rows.append((f"mcp {name}", f"{state}, {server['tools']} tool(s), {server['restarts']} restart(s)"))
    if "queue_depth" in info:
        oldest = info.get("oldest_queued_seconds")
        suffix = f" (oldest waiting {oldest}s)" if oldest is not None else ""
        rows.append(("queue", f"{info['queue_depth']} message(s){suffix}"))
        rows.append(("running turns", str(info.get("running_turns", 0))))
    if "undelivered_replies" in info:
        oldest = info.get("oldest_undelivered_seconds")
        suffix = f" (oldest recorded {oldest}s ago)" if oldest is not None else ""
        rows.append(("replies", f"{info['undelivered_replies']} on their way{suffix}"))
        rows.extend(("STUCK reply", line) for line in info.get("stuck_replies", ()))
    for key in ("last_error", "last_session_error", "store_error", "detail"):
        if info.get(key):
            rows.append((key.replace("_", " "), str(info[key])))
    width = max(len(label) for label, _ in rows) + 1
    for label, value in rows:
        print(f"  {label + ':':<{width}} {value}")


def cmd_status(
    args: argparse.Namespace, state_dir: Path, fleet: list[dict[str, object]] | None = None
) -> int:
    """This state dir's gateway; with ``fleet`` (a PostgreSQL store), every process sharing it."""
    info = gather_status(state_dir)
    if fleet is not None:
        info["fleet"] = fleet
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True, default=str))
    else:
        _print_status(info)
        if fleet is not None:
            _print_fleet(fleet)
    return 0 if info["running"] else EX_NOT_RUNNING


def _print_fleet(fleet: list[dict[str, object]]) -> None:
    if not fleet:
        print("fleet: no other gateway process on this database")
        return
    print(f"fleet: {len(fleet)} other process(es) on this database")
    for p in fleet:
        state = "alive" if p["alive"] else "DEAD (its work passes on at the next claim)"
        adapters = p.get("adapters") or {}
        serves = (
            ", ".join(f"{k} ({v})" for k, v in sorted(adapters.items())) if isinstance(adapters, dict) else ""
        )
        print(
            f"  {p['host']} pid {p['pid']} ({p['owner'] or 'starting'}): {state},"
            f" {p['leases']} session lease(s), {p['sending']} reply(ies) being sent;"
            f" adapters: {serves or 'none'}"
        )


def cmd_stop(args: argparse.Namespace, state_dir: Path) -> int:
    path = runtime_lock(state_dir).path
    record = read_record(path)
    if not is_held(path) or record is None:
        print(f"chatgate is not running (state dir {state_dir})")
        return 0
    print(f"stopping chatgate pid {record.pid}…", flush=True)
    report = stop_gateway(record, timeout=args.timeout, force=args.force)
    if not report.stopped:
        print(
            f"pid {record.pid} is still running after {args.timeout:.0f}s;"
            " wait longer (--timeout) or use --force to kill it",
            file=sys.stderr,
        )
        return 1
    how = "killed" if report.forced else "stopped"
    print(f"{how} pid {record.pid} in {report.seconds:.1f}s")
    if report.reaped:
        print(f"also stopped orphaned child process(es): {report.reaped}")
    return 0


def cmd_config_check(args: argparse.Namespace) -> int:
    """Checks the file; a secret not set yet is a warning (``--strict``: an error, as ``run`` has it),
    so the check works in a terminal without the gateway's secrets."""
    path = Path(args.file) if args.file else (Path(args.config) if args.config else None)
    # raises ConfigError, reported by main() (exit 78)
    config: GatewayConfig = load_config(path, need_secrets=args.strict)
    where = path or "built-in defaults"
    http = f"{config.http.host}:{config.http.port}"
    print(f"{where}: OK (agent {config.agent.kind}, store {config.store.backend}, http {http})")
    for need in missing_secrets(config, os.environ):
        variable = need.env or "(no variable named)"
        print(
            f"warning: {need.key}: {variable} ({need.what}) is not set here; `chatgate run` refuses to"
            " start until it is in its environment or the state directory's chatgate.env"
            " (`chatgate init` writes it)",
            file=sys.stderr,
        )
    return 0
