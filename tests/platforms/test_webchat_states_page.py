"""States that tell the truth, and what a person does with a bubble: a message not delivered yet
is marked so and has no typing dots; Stop is there only while a reply is on its way; errors
offer Retry; a reply can be copied whole or regenerated; a message edited and sent again;
every bubble says when on hover. Real Chromium, real gateway; the page's socket goes through
a Playwright route that can hold the page's messages (as a dead network would)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from support.axe import axe_violations
from support.browser import SIZES, BrowserSession, at_size, browser, open_chat, send
from support.web_harness import StartGateway, web_config

pytestmark = pytest.mark.browser
__all__ = ["browser"]


class Switch:
    """The page's socket through a route: while ``held``, the page's messages go nowhere."""

    def __init__(self) -> None:
        self.held = False
        self.routes: list[Any] = []

    async def handle(self, ws: Any) -> None:
        server = ws.connect_to_server()
        self.routes.append(ws)

        def to_server(message: str | bytes) -> None:
            if not (self.held and isinstance(message, str) and json.loads(message).get("type") == "message"):
                server.send(message)

        ws.on_message(to_server)
        server.on_message(lambda message: ws.send(message))


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_a_message_not_delivered_yet_has_no_typing_dots_and_stop_is_there_only_while_answering(
    start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway(web_config(agent={"echo": {"chunk_delay_ms": 150}}))
    switch = Switch()
    await browser.page.route_web_socket(re.compile(r".*/ws$"), switch.handle)
    page = await open_chat(await at_size(browser.page, size), gateway.port)
    await expect(page.locator("#stop")).to_be_hidden()  # idle: nothing to stop

    switch.held = True
    await send(page, "a reply long enough to be stopped while it streams " * 4)
    mine = page.locator(".msg.me")
    await expect(mine).to_have_class(re.compile(r"\bpending\b"))
    assert await mine.evaluate("e => getComputedStyle(e, '::after').content") == '"not delivered yet"'
    await expect(page.locator("#typing")).to_be_hidden()  # nobody is answering an undelivered message
    await expect(page.locator("#stop")).to_be_hidden()
    assert await page.evaluate("window.__typingSeen") is False

    switch.held = False
    await switch.routes[-1].close()  # the connection drops; the page reconnects and resends
    await expect(mine).not_to_have_class(re.compile(r"\bpending\b"))
    await page.wait_for_selector(".msg.bot.draft")
    await expect(page.locator("#stop")).to_be_visible()
    await page.click("#stop")
    await expect(page.locator(".msg.stopped")).to_have_count(1)
    await expect(page.locator("#stop")).to_be_hidden()
    await expect(page.locator(".msg.notice, .msg.bot:not(.stopped)")).to_have_count(
        0
    )  # no "Dropped 0" bubble


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_a_failed_reply_offers_retry_which_sends_the_message_again(
    start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    from playwright.async_api import expect

    config = web_config(agent={"echo": {"chunk_delay_ms": 2000}, "turn_timeout_seconds": 0.5})
    gateway = await start_gateway(config)
    page = await open_chat(await at_size(browser.page, size), gateway.port)
    await send(page, "too slow")
    failure = page.locator(".msg.failure")
    await expect(failure).to_have_count(1)
    retry = failure.get_by_role("button", name="Retry")
    await expect(retry).to_be_visible()
    await retry.click()
    await expect(page.locator(".msg.me")).to_have_text(["too slow", "too slow"])
    await expect(failure).to_have_count(2)


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_copy_a_whole_reply_regenerate_it_edit_a_message_and_see_when_on_hover(
    start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = await open_chat(await at_size(browser.page, size), gateway.port)
    await browser.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await send(page, "**bold** and `code`")
    reply = page.locator(".msg.bot:not(.draft)")
    await expect(reply).to_have_count(1)
    await expect(reply).to_have_text("echo: bold and code")  # the tools add no text to the bubble

    await reply.hover()
    await reply.get_by_role("button", name="Copy").click()
    await expect(reply.get_by_role("button", name="Copied")).to_be_visible()
    assert await page.evaluate("navigator.clipboard.readText()") == "echo: **bold** and `code`"

    await reply.get_by_role("button", name="Regenerate").click()
    await expect(reply.locator(".versions .count")).to_have_text("2/2")  # test_webchat_regenerate_page.py
    await expect(page.locator(".msg.me")).to_have_text(["**bold** and `code`"])
    await expect(reply).to_have_count(1)

    mine = page.locator(".msg.me").first
    await mine.hover()
    await mine.get_by_role("button", name="Edit").click()
    await expect(page.locator("#text")).to_be_focused()
    await expect(page.locator("#text")).to_have_value("**bold** and `code`")
    await page.keyboard.press("End")
    await page.keyboard.type(" again")
    await page.keyboard.press("Enter")
    await expect(reply.last).to_have_text("echo: bold and code again")
    assert await axe_violations(page) == []  # versions, bubble tools and an edited message

    for bubble in await page.locator(".msg.me, .msg.bot").all():
        assert re.search(r"\d{4}|\d:\d\d", await bubble.get_attribute("title") or ""), "no time on hover"
    await page.reload()  # from the gateway's history too
    await expect(page.locator("#status")).to_have_text("connected")
    assert re.search(r"\d:\d\d", await page.locator(".msg.me").first.get_attribute("title") or "")
