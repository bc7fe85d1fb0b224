"""An MCP tool's approval card in the web chat reads like the shell's: what will be called
(server, tool, arguments), why a person must decide, the deadline; no rule key, no slash
syntax. Real Chromium, real gateway, the OpenAI agent against a local scripted server, and
the probe MCP server over stdio."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from agents.fake_openai_server import API_KEY, CallTools, Reply, ScriptedCall, running
from support.browser import BrowserSession, browser, open_chat, send
from support.web_harness import StartGateway, web_config

pytestmark = pytest.mark.browser
__all__ = ["browser"]

PROBE = str(Path(__file__).parents[1] / "support" / "mcp_probe_server.py")


async def test_the_mcp_approval_card_names_server_tool_and_arguments(
    tmp_path: Path, start_gateway: StartGateway, browser: BrowserSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.async_api import expect

    monkeypatch.setenv("FAKE_KEY", API_KEY)
    env = {"MCP_PROBE_LOG": str(tmp_path / "calls.log"), "PYTHONPATH": os.pathsep.join(sys.path)}
    with running() as model:
        args = json.dumps({"text": "hello"})
        model.script(CallTools((ScriptedCall("probe__write_note", args, call_id="c1"),)), Reply("Noted."))
        config = web_config(
            agent={
                "kind": "openai",
                "openai": {"base_url": model.base_url, "api_key_env": "FAKE_KEY", "model": "m"},
                "mcp": {"servers": {"probe": {"command": sys.executable, "args": [PROBE], "env": env}}},
            }
        )
        gateway = await start_gateway(config)
        page = await open_chat(browser.page, gateway.port)
        await send(page, "note hello")
        card = page.locator(".msg.prompt")
        await expect(card.locator("h3")).to_have_text("The agent wants to call this MCP tool:")
        await expect(card.locator("pre")).to_have_text(
            'MCP server: probe\nTool: write_note\nArguments: {"text": "hello"}'
        )
        await expect(card.locator("li").first).to_contain_text("may destroy or overwrite things")
        text = await card.locator(".body").inner_text()
        assert "[" not in text and "/approve" not in text and "/deny" not in text, text
        await card.get_by_role("button", name="Approve once").click()
        await expect(card.locator(".outcome")).to_contain_text("Approved")
        await expect(page.locator(".msg.bot:not(.draft)").last).to_contain_text("Noted.")
        assert (tmp_path / "calls.log").read_text().splitlines() == ["write_note hello"]
