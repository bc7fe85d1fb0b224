"""An MCP tool on a native platform: the whole gateway in process with Telegram (the Bot API
double), the OpenAI agent (a local OpenAI-compatible server scripted to call the tool) and
``mcp-server-time`` from PyPI. The prompt is an inline keyboard naming server, tool and
arguments; the tap runs the tool and the model reads its real answer."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from telegram_double import BotApiDouble, Gateways, User, private, telegram_config

from agents.fake_openai_server import API_KEY, CallTools, Reply, ScriptedCall, running

ALMA = User(7002, "Alma")


async def test_a_registry_mcp_tool_behind_an_inline_keyboard_prompt(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    exe = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    assert exe, "mcp-server-time is in the test extra"
    with running() as model:
        args = json.dumps({"timezone": "America/New_York"})
        model.script(CallTools((ScriptedCall("time__get_current_time", args, call_id="c1"),)), Reply("Told."))
        config = telegram_config(
            double,
            tmp_path,
            telegram={"allow_users": [ALMA.id]},
            agent={
                "kind": "openai",
                "openai": {"base_url": model.base_url, "api_key_env": "FAKE_KEY", "model": "m"},
                "mcp": {"servers": {"time": {"command": exe, "policy": "ask"}}},
            },
        )
        gateway = await gateways.start(config)
        status = (await gateway.status())["mcp_servers"]
        assert status == {"time": {"connected": True, "tools": 2, "restarts": 0}}
        chat = private(ALMA)
        await double.push_message(chat, ALMA, "what time is it in New York?")
        await double.wait_for(
            lambda: any(m.keyboard for m in double.view(chat.id)), what="the prompt", timeout=30
        )
        [prompt] = [m for m in double.view(chat.id) if m.keyboard]
        assert "MCP server: time" in prompt.text and "Tool: get_current_time" in prompt.text
        assert "America/New_York" in prompt.text
        once = next(
            b["callback_data"]
            for row in prompt.keyboard or []
            for b in row
            if b["callback_data"].endswith(":once")
        )
        await double.push_callback(chat, ALMA, prompt.message_id, once)
        await double.wait_for(
            lambda: any(m.text == "Told." for m in double.view(chat.id)), what="the final", timeout=30
        )
        results = [
            m["content"] for r in model.requests for m in r.body["messages"] if m.get("role") == "tool"
        ]
        assert json.loads(results[0])["timezone"] == "America/New_York"
