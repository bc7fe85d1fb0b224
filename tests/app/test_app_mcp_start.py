"""A start that fails after the MCP servers started (here: the HTTP port is taken) closes
them: no server process of the gateway's is left running."""

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

PROBE = str(Path(__file__).parents[1] / "support" / "mcp_probe_server.py")


async def test_a_failed_start_closes_the_mcp_servers_it_started(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    env = {"MCP_PROBE_LOG": str(log), "PYTHONPATH": os.pathsep.join(sys.path)}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = GatewayConfig(
            http={"port": port},
            agent={"mcp": {"servers": {"probe": {"command": sys.executable, "args": [PROBE], "env": env}}}},
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
