"""What ``chatgate run`` imports before its first poll (issue 13: the first getUpdates of a
restart, not the HTTP stack or the other commands, sets its downtime).

``first_poll_probe.py`` runs the gateway (Telegram only) in a fresh interpreter and
snapshots ``sys.modules`` at the Bot API double's first ``getUpdates``, holding any import
of uvicorn or starlette back until then. These are facts about imports, not timings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

PROBE = Path(__file__).with_name("first_poll_probe.py")
CLI_ONLY = (
    "chatgate.app.cli.init",
    "chatgate.app.cli.ops",
    "chatgate.app.cli.platform_commands",
    "chatgate.platforms.api.cli",
    "chatgate.app.cli.pairing",
    "chatgate.app.cli.schedules",
    "chatgate.app.cli.sessions",
    "chatgate.app.cli.store",
    "chatgate.platforms.webchat.cli",
    "chatgate.app.cli.service",
)
HTTP_STACK = ("uvicorn", "starlette", "chatgate.app.http.app")
UNCONFIGURED = (
    "chatgate.platforms.webchat.adapter",
    "chatgate.platforms.slack.plugin",
    "chatgate.platforms.discord.plugin",
    "chatgate.platforms.relay.plugin",
    "chatgate.platforms.api.plugin",
)
"""A Telegram-only config (the web chat disabled) never imports another platform's code."""


def _probe(tmp_path: Path, *flags: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    done = subprocess.run(
        [sys.executable, str(PROBE), str(tmp_path), *flags],
        capture_output=True,
        text=True,
        timeout=100,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads((tmp_path / "modules.json").read_text(encoding="utf-8"))
    assert result["at_first_poll"] is not None, "the gateway never polled"
    return result


def test_the_first_poll_waits_for_neither_the_http_stack_nor_the_other_commands(tmp_path: Path) -> None:
    result = _probe(tmp_path)
    at_poll, after = set(result["at_first_poll"]), set(result["after_start"])
    assert not at_poll & set(HTTP_STACK), sorted(at_poll & set(HTTP_STACK))
    # No platform here brought a route and no webhook is set: the HTTP server would start at
    # its first connection (``test_http_on_demand.py``), and none came in this gateway's life.
    assert not after & set(HTTP_STACK), sorted(after & set(HTTP_STACK))
    # The lock record's start time comes from /proc, and the state directory is given: a start
    # loads neither psutil nor platformdirs (about 0.8 MB it would keep).
    assert not {"psutil", "platformdirs"} & after, sorted({"psutil", "platformdirs"} & after)
    assert not (at_poll | after) & set(CLI_ONLY), sorted((at_poll | after) & set(CLI_ONLY))
    assert "chatgate.platforms.telegram.botapi" in at_poll
    assert not (at_poll | after) & set(UNCONFIGURED), sorted((at_poll | after) & set(UNCONFIGURED))
    assert "mcp" not in at_poll | after, "the MCP SDK is imported only when agent.mcp.servers is set"
    # The config's sections and Telegram's update records are msgspec Structs: pydantic (about
    # 12 MB of peak RSS with the config's models) loads only with a platform whose wire bodies
    # use it (the web chat, the API, the relay), and this config enables none.
    assert not {m for m in at_poll | after if m.split(".")[0] in ("pydantic", "pydantic_core")}
    # No platform here brought a WebSocket route, so uvicorn was told to load no WebSocket
    # protocol, and neither it nor the websockets library was imported (about 1 MB).
    websocket = sorted(
        m for m in after if m == "websockets" or m.startswith(("websockets.", "uvicorn.protocols.websockets"))
    )
    assert not websocket, websocket


def test_with_a_webhook_route_the_http_stack_comes_after_the_first_poll_in_a_thread(tmp_path: Path) -> None:
    result = _probe(tmp_path, "--webhook")
    at_poll, after = set(result["at_first_poll"]), set(result["after_start"])
    assert not at_poll & set(HTTP_STACK), sorted(at_poll & set(HTTP_STACK))
    assert set(HTTP_STACK) <= after, "a gateway with a route serves from its start"
    # Nothing on the loop's thread waited for uvicorn or starlette: the start imports them in
    # a thread once the platforms poll (a MainThread entry here would be a start that blocked;
    # under load the thread may not have reached the import by the first poll: no entry).
    assert all(h["thread"] != "MainThread" and h["released"] for h in result["held"]), result["held"]
