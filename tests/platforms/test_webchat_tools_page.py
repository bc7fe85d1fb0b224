"""What the agent did, readable: an approval card in plain words (what will run, why, by when;
no rule key, no slash syntax), and the reply's tool calls as collapsible steps kept with it, in
the gateway's history too (another device, or this browser's history gone).
Real Chromium, real gateway, the real shell tool behind the approval broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.axe import axe_violations
from support.browser import SIZES, BrowserSession, at_size, browser, open_chat, send
from support.web_harness import StartGateway, web_config

pytestmark = pytest.mark.browser
__all__ = ["browser"]


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_the_approval_card_reads_at_a_glance_and_the_tool_call_stays_as_a_step(
    tmp_path: Path, start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    from playwright.async_api import expect

    workdir = tmp_path / "work"
    (workdir / "x").mkdir(parents=True)
    config = web_config(
        agent={"echo": {"chunk_delay_ms": 0}}, tools={"enabled": True, "workdir": str(workdir)}
    )
    gateway = await start_gateway(config)
    page = await open_chat(await at_size(browser.page, size), gateway.port)
    await send(page, "!sh rm -rf ./x")
    card = page.locator(".msg.prompt")
    await expect(card.locator("h3")).to_have_text("The agent wants to run this shell command:")
    await expect(card.locator("pre")).to_have_text("rm -rf ./x")
    await expect(card.locator("li").first).to_be_visible()
    await expect(card.locator(".deadline")).to_contain_text("Not run unless someone approves within")
    text = await card.locator(".body").inner_text()
    assert "[" not in text and "/approve" not in text and "/deny" not in text, text
    await card.get_by_role("button", name="Approve once").focus()
    await page.keyboard.press("Enter")  # by keyboard
    await expect(card.locator(".outcome")).to_contain_text("Approved")

    reply = page.locator(".msg.bot:not(.draft)").last
    await expect(reply).to_contain_text("exit code 0")
    steps = reply.locator("details.steps")
    await expect(steps.locator("summary")).to_have_text("1 step")
    await expect(steps.locator("li")).to_be_hidden()  # collapsed
    await steps.locator("summary").click()
    await expect(steps.locator("li")).to_have_text(["shell rm -rf ./x — done"])
    assert await axe_violations(page) == []  # the answered card and the open steps

    await page.reload()  # kept in the history
    await expect(page.locator("#status")).to_have_text("connected")
    await expect(page.locator(".msg.bot details.steps summary")).to_have_text("1 step")
    await expect(page.locator(".msg.prompt pre")).to_have_text("rm -rf ./x")

    # another device (a phone): this browser's history gone, the conversation read from the gateway
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.evaluate("Object.keys(localStorage).filter((k) => k.startsWith('chatgate.history.'))"
                        ".forEach((k) => localStorage.removeItem(k))")  # fmt: skip
    await page.reload()
    await expect(page.locator("#status")).to_have_text("connected")
    steps = page.locator(".msg.bot details.steps")
    await expect(steps.locator("summary")).to_have_text("1 step")
    await steps.locator("summary").click()
    await expect(steps.locator("li")).to_have_text(["shell rm -rf ./x — done"])
    assert await axe_violations(page) == []
