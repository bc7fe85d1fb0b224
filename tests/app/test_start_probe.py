"""The start line warns when the model endpoint does not answer (issue 28, item 1): an operator
learns it at the start, not from the first user's failed turn."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from support.procs import GatewayProcess, free_port  # a port nobody listens on: connecting is refused


def _openai(base_url: str) -> dict[str, object]:
    return {"agent": {"kind": "openai", "openai": {"base_url": base_url, "model": "m", "api_key_env": "K"}}}


async def _start_line(tmp_path: Path, base_url: str) -> str:
    gateway = GatewayProcess(tmp_path, _openai(base_url))
    await gateway.start(launcher=["env", "K=placeholder", sys.executable, "-m", "chatgate.app.cli"])
    try:
        lines = [line for line in gateway.logs().splitlines() if " started: state dir " in line]
    finally:
        await gateway.terminate()
    assert len(lines) == 1, gateway.logs()
    return lines[0]


async def test_the_start_line_warns_when_the_model_endpoint_refuses(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    line = await _start_line(tmp_path, url)
    assert " WARNING " in line
    assert f"the model endpoint {url} does not answer (connection refused)" in line


async def test_the_start_line_is_plain_info_when_the_model_endpoint_listens(tmp_path: Path) -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        url = f"http://127.0.0.1:{listening.getsockname()[1]}/v1"
        line = await _start_line(tmp_path, url)
    assert " INFO " in line and "does not answer" not in line
