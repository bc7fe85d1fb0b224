"""The welcome screen names the agent (``platforms.web.agent_name``, issue 34), as text: a name
with markup characters stays a name. Without one it names nobody. Real Chromium, both sizes."""

from __future__ import annotations

import pytest

from support.axe import axe_violations
from support.browser import SIZES, BrowserSession, browser, open_chat, send
from support.web_harness import StartGateway, web_config

pytestmark = pytest.mark.browser
__all__ = ["browser"]

NAME = 'Ada <img src=x onerror="window.__pwned=1"> & "Co"'


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_the_welcome_names_the_agent_of_the_config(
    start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    from playwright.async_api import expect

    config = web_config(agent={"echo": {"chunk_delay_ms": 0}}, platforms={"web": {"agent_name": NAME}})
    gateway = await start_gateway(config)
    page = browser.page
    await page.set_viewport_size(SIZES[size])
    await open_chat(page, gateway.port)
    title = page.locator("#welcome h2")
    await expect(title).to_have_text(f"Hello, I am {NAME}. What shall we work on?")
    assert await title.locator("*").count() == 0  # the name is text
    assert await page.locator("#typing .sr").text_content() == f"{NAME} is writing…"
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        assert await axe_violations(page) == [], scheme
    await send(page, "hi")
    await expect(page.locator("#welcome")).to_be_hidden()
    assert await page.evaluate("window.__pwned ?? null") is None


async def test_without_a_name_the_welcome_names_nobody(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway(web_config())
    page = await open_chat(browser.page, gateway.port)
    await expect(page.locator("#welcome h2")).to_have_text("Hello! What shall we work on?")
