"""MCP tools end to end: a real ``chatgate run`` subprocess with the OpenAI agent (a local
OpenAI-compatible server scripted to call the tool), ``mcp-server-time`` from PyPI and our
probe server over stdio, and a web chat user on a real WebSocket who answers the prompt.

The probe is killed mid-call by its own ``die`` tool: that call is a tool error, the next
call works on the restarted server; at shutdown no server process is left running."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from agents.fake_openai_server import API_KEY, CallTools, FakeOpenAIServer, Reply, ScriptedCall, running
from support.procs import FrameClient, GatewayProcess

pytestmark = pytest.mark.slow

PROBE = str(Path(__file__).parents[1] / "support" / "mcp_probe_server.py")


def _config(model: FakeOpenAIServer, tmp: Path) -> dict[str, object]:
    exe = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    assert exe, "mcp-server-time is in the test extra"
    probe_env = {"MCP_PROBE_LOG": str(tmp / "calls.log"), "PYTHONPATH": os.pathsep.join(sys.path)}
    return {
        "agent": {
            "kind": "openai",
            "openai": {"base_url": model.base_url, "api_key_env": "FAKE_KEY", "model": "m"},
            "mcp": {
                "servers": {
                    "time": {"command": exe, "args": ["--local-timezone", "UTC"], "policy": "ask"},
                    "probe": {"command": sys.executable, "args": [PROBE], "env": probe_env},
                }
            },
        },
        "shutdown": {"drain_seconds": 5},
    }


def _call(name: str, args: dict[str, object], call_id: str) -> CallTools:
    return CallTools((ScriptedCall(name, json.dumps(args), call_id=call_id),))


def _tool_results(model: FakeOpenAIServer) -> list[str]:
    return [m["content"] for r in model.requests for m in r.body["messages"] if m.get("role") == "tool"]


def _server_pids(gateway_pid: int) -> set[int]:
    """Processes whose parent is the gateway (its MCP servers)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == gateway_pid and stat[0] != "Z":
                found.add(int(entry.name))
    return found


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def test_a_registry_tool_through_a_web_chat_approval_and_a_crash_restarted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    with running() as model:
        model.script(
            _call("time__get_current_time", {"timezone": "Asia/Tokyo"}, "c1"),
            Reply("Tokyo time told."),
            _call("probe__die", {}, "c2"),
            Reply("The probe broke."),
            _call("probe__echo", {"text": "again"}, "c3"),
            Reply("The probe is back."),
        )
        gateway = GatewayProcess(tmp_path, _config(model, tmp_path))
        await gateway.start()
        ann = FrameClient(gateway.port, "chat-1", "ann", "Ann")
        try:
            await ann.connect()
            assert gateway.proc is not None
            assert len(_server_pids(gateway.proc.pid)) == 2  # both servers started with the gateway

            await ann.message("m1", "what time is it in Tokyo?")
            prompt = await ann.prompt()
            assert "call this MCP tool" in prompt["text"] and "MCP server: time" in prompt["text"]
            assert "Tool: get_current_time" in prompt["text"] and "Asia/Tokyo" in prompt["text"]
            await ann.tap(prompt["prompt_id"], "once")
            assert (await ann.final("m1"))["text"] == "Tokyo time told."
            assert json.loads(_tool_results(model)[0])["timezone"] == "Asia/Tokyo"

            await ann.message("m2", "break the probe")
            assert (await ann.final("m2"))["text"] == "The probe broke."
            assert "failed during the call" in _tool_results(model)[1]
            await ann.message("m3", "and again")
            assert (await ann.final("m3"))["text"] == "The probe is back."
            assert _tool_results(model)[2] == "echo: again"
            assert (tmp_path / "calls.log").read_text().splitlines()[-1] == "echo again"
        finally:
            await ann.close()
        pid = gateway.proc.pid
        servers = _server_pids(pid)
        assert len(servers) == 2
        await gateway.terminate()
        assert gateway.proc.returncode == 0
        left = [p for p in servers if _running(p)]
        assert left == []
