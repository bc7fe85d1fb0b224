"""MCP servers in the gateway's lifetime: a start that fails after they started (here: the
HTTP port is taken) closes them, no server process left running; ``chatgate status`` names
each one."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import psutil
import pytest

from chatgate.app.config import GatewayConfig
from chatgate.app.gateway import Gateway
from chatgate.domain.errors import AddressInUse
from chatgate.platforms.kit.conform import conform

PROBE = str(Path(__file__).parents[1] / "support" / "mcp_probe_server.py")


async def test_a_failed_start_closes_the_mcp_servers_it_started(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    env = {"MCP_PROBE_LOG": str(log), "PYTHONPATH": os.pathsep.join(sys.path)}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = conform(
            GatewayConfig,
            dict(
                http={"port": port},
                agent={
                    "mcp": {"servers": {"probe": {"command": sys.executable, "args": [PROBE], "env": env}}}
                },
            ),
        )
        gateway = Gateway(config, tmp_path / "state")
        before = {p.pid for p in psutil.Process().children(recursive=True)}
        with pytest.raises(AddressInUse):
            await gateway.start()
    left = [
        p
        for p in psutil.Process().children(recursive=True)
        if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE
    ]
    assert left == []
    assert "probe" in gateway.engine.settings.mcp.owners  # type: ignore[union-attr]
    assert gateway.engine.settings.mcp.owners["probe"].connects == 1  # type: ignore[union-attr]


def test_chatgate_status_prints_each_mcp_server(capsys: pytest.CaptureFixture[str]) -> None:
    from chatgate.app.cli.ops import _print_status

    info = {
        "running": True,
        "pid": 1,
        "uptime_seconds": 3,
        "state_dir": "/s",
        "mcp_servers": {
            "time": {"connected": True, "tools": 2, "restarts": 0},
            "git": {"connected": False, "tools": 12, "restarts": 3},
        },
    }
    _print_status(info)
    out = capsys.readouterr().out
    assert "  mcp time:  connected, 2 tool(s), 0 restart(s)\n" in out
    assert "  mcp git:   DISCONNECTED, 12 tool(s), 3 restart(s)\n" in out
