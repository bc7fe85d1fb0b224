"""The model picker (issue 34): a select in the header lists the model profiles and shows the
conversation's own; choosing one by keyboard sends the session's ``/model`` switch, the next
reply comes from that model, a reload keeps it and a new conversation starts on the default.
Hidden with one profile. Real Chromium, a real gateway, a fake OpenAI-compatible server."""

from __future__ import annotations

import pytest

from agents.fake_openai_server import API_KEY, FakeOpenAIServer, Reply, running
from support.axe import axe_violations
from support.browser import SIZES, BrowserSession, browser, open_chat, send
from support.web_harness import StartGateway, web_config

pytestmark = pytest.mark.browser
__all__ = ["browser"]


def _models_asked(model: FakeOpenAIServer, text: str) -> list[str]:
    """The model each upstream request ending with the message ``text`` asked for."""
    return [r.body["model"] for r in model.requests if r.body["messages"][-1]["content"] == text]


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_the_picker_switches_the_conversations_model_by_keyboard(
    start_gateway: StartGateway, browser: BrowserSession, size: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.async_api import expect

    monkeypatch.setenv("FAKE_KEY", API_KEY)
    with running() as model:
        model.script(Reply("ok"))
        endpoint = {"base_url": model.base_url, "api_key_env": "FAKE_KEY"}
        agent = {"kind": "openai", "openai": {**endpoint, "model": "m-main"}}
        agent["profiles"] = {"fast": {**endpoint, "model": "m-fast"}}
        gateway = await start_gateway(web_config(agent=agent))
        page = browser.page
        await page.set_viewport_size(SIZES[size])
        await open_chat(page, gateway.port)
        picker = page.get_by_role("combobox", name="Model")
        await expect(picker).to_be_visible()
        await expect(picker.locator("option")).to_have_text(["default", "fast"])
        await expect(picker).to_have_value("default")
        assert await page.evaluate("document.documentElement.scrollWidth") <= SIZES[size]["width"]
        for scheme in ("light", "dark"):
            await page.emulate_media(color_scheme=scheme)
            assert await axe_violations(page) == [], scheme

        await picker.focus()
        await page.keyboard.press("ArrowDown")  # a closed select changes its value by keyboard
        await expect(picker).to_have_value("fast")
        await expect(page.locator(".msg.notice")).to_contain_text("Switched this session to fast")
        await send(page, "which model?")
        await expect(page.locator(".msg.bot:not(.draft):not(.notice)")).to_have_text("ok")
        asked = [
            r.body["model"] for r in model.requests if r.body["messages"][-1]["content"] == "which model?"
        ]
        assert asked == ["m-fast"]

        await page.reload()
        await expect(page.locator("#status")).to_have_text("connected")
        await expect(picker).to_have_value("fast")  # the session's choice, from the ready frame
        chat_id = await page.evaluate("localStorage.getItem('chatgate.chat')")
        await page.get_by_role("button", name="New").click()
        await expect(picker).to_have_value("default")  # another conversation, another session
        await send(page, "and now?")
        await expect(page.locator(".msg.bot:not(.draft):not(.notice)")).to_have_text("ok")
        assert _models_asked(model, "and now?") == ["m-main"]

        # the first conversation read back from the gateway: its choice, the switch as a notice
        await page.evaluate("(id) => localStorage.removeItem('chatgate.history.' + id)", chat_id)
        if size == "phone":
            await page.get_by_role("button", name="Chats").click()
        await page.locator("#conversations a").filter(has_text="which model?").click()
        await expect(picker).to_have_value("fast")
        await expect(page.locator(".msg.notice")).to_contain_text("Switched this session to fast")
        await expect(page.locator(".msg.me")).to_have_text(["which model?"])  # not the /model command


async def test_the_picker_is_hidden_with_one_profile(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway(web_config(agent={"echo": {"chunk_delay_ms": 0}}))
    page = await open_chat(browser.page, gateway.port)
    await expect(page.locator("#model")).to_be_hidden()
