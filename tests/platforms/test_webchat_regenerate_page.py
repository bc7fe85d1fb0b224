"""Regenerate keeps the old answer (issue 34): the question is asked again, the new answer takes
the reply's place and ``< 1/2 >`` switches between the two, by keyboard too; no second question
appears; the versions stay after a reload (this browser's history) and when the conversation is
read back from the gateway, which records which message Regenerate sent (so the same question
typed twice stays two exchanges there). Real Chromium, a real gateway, a scripted model."""

from __future__ import annotations

from typing import Any

import pytest

from agents.fake_openai_server import API_KEY, Hang, Reply, running
from support.axe import axe_violations
from support.browser import SIZES, BrowserSession, browser, open_chat, send
from support.web_harness import StartGateway, web_config

pytestmark = pytest.mark.browser
__all__ = ["browser"]


async def _versions(page: Any) -> tuple[str, str]:
    reply = page.locator(".msg.bot:not(.draft)")
    return await reply.locator(".body").inner_text(), await reply.locator(".versions .count").inner_text()


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_regenerate_keeps_both_answers_switchable(
    start_gateway: StartGateway, browser: BrowserSession, size: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.async_api import expect

    monkeypatch.setenv("FAKE_KEY", API_KEY)
    with running() as model:
        model.script(Reply("first answer"), Reply("second **answer**", chunks=3), Reply("typed again"))
        endpoint = {"base_url": model.base_url, "api_key_env": "FAKE_KEY", "model": "m"}
        gateway = await start_gateway(web_config(agent={"kind": "openai", "openai": endpoint}))
        page = browser.page
        await page.set_viewport_size(SIZES[size])
        await open_chat(page, gateway.port)
        await send(page, "question")
        reply = page.locator(".msg.bot:not(.draft)")
        await expect(reply).to_have_text("first answer")
        await expect(reply.locator(".versions")).to_have_count(0)  # one answer: no control

        await reply.hover()
        await reply.get_by_role("button", name="Regenerate").click()
        await expect(reply.locator(".versions .count")).to_have_text("2/2")
        await expect(reply.locator(".body")).to_have_text("second answer")
        await expect(reply).to_have_count(1)
        await expect(page.locator(".msg.me")).to_have_text(["question"])  # asked again, not shown twice
        assert len(model.requests) == 2

        previous = reply.get_by_role("button", name="Previous answer")
        await previous.focus()
        await page.keyboard.press("Enter")
        await expect(reply.locator(".body")).to_have_text("first answer")
        await expect(reply.locator(".versions .count")).to_have_text("1/2")
        await expect(reply.get_by_role("button", name="Next answer")).to_be_focused()  # at the start
        await expect(reply.get_by_role("button", name="Previous answer")).to_be_disabled()
        for scheme in ("light", "dark"):
            await page.emulate_media(color_scheme=scheme)
            assert await axe_violations(page) == [], scheme
        assert await page.evaluate("document.documentElement.scrollWidth") <= SIZES[size]["width"]

        await page.reload()  # this browser's history keeps both, and which one showed
        await expect(page.locator("#status")).to_have_text("connected")
        assert await _versions(page) == ("first answer", "1/2")

        # read back from the gateway: the conversation forgotten by this browser, then picked
        chat_id = await page.evaluate("localStorage.getItem('chatgate.chat')")
        await page.get_by_role("button", name="New").click()
        await expect(page.locator(".msg")).to_have_count(0)
        await page.evaluate("(id) => localStorage.removeItem('chatgate.history.' + id)", chat_id)
        if size == "phone":
            await page.get_by_role("button", name="Chats").click()
        await page.locator("#conversations a").filter(has_text="question").click()
        await expect(page.locator(".msg.me")).to_have_text(["question"])
        await expect(reply.locator(".versions .count")).to_have_text("2/2")
        assert await _versions(page) == ("second answer", "2/2")

        # the same question typed again right after is a new exchange, not a regenerate
        await send(page, "question")
        await expect(page.locator(".msg.bot:not(.draft)").last).to_have_text("typed again")
        await page.evaluate("(id) => localStorage.removeItem('chatgate.history.' + id)", chat_id)
        await page.reload()  # read back from the gateway again
        await expect(page.locator("#status")).to_have_text("connected")
        await expect(page.locator(".msg.me")).to_have_text(["question", "question"])
        answers = page.locator(".msg.bot:not(.draft)")
        await expect(answers.locator(".body")).to_have_text(["second answer", "typed again"])
        await expect(answers.first.locator(".versions .count")).to_have_text("2/2")
        await expect(answers.last.locator(".versions")).to_have_count(0)


async def test_stop_while_regenerating_leaves_the_answer_as_it_was(
    start_gateway: StartGateway, browser: BrowserSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.async_api import expect

    monkeypatch.setenv("FAKE_KEY", API_KEY)
    with running() as model:
        model.script(Reply("first answer"), Hang())  # the second answer never comes
        endpoint = {"base_url": model.base_url, "api_key_env": "FAKE_KEY", "model": "m"}
        gateway = await start_gateway(web_config(agent={"kind": "openai", "openai": endpoint}))
        page = await open_chat(browser.page, gateway.port)
        await send(page, "question")
        # The answer is the first bot message: stopping may add a notice after it ("Stopped. Dropped 1
        # waiting ..." when the regenerate request was still queued), which is another message.
        reply = page.locator(".msg.bot:not(.draft)").first
        await expect(reply).to_have_text("first answer")
        await reply.hover()
        await reply.get_by_role("button", name="Regenerate").click()
        await expect(reply.locator(".body")).to_have_text("Writing another answer…")
        await expect(reply).to_have_attribute("aria-busy", "true")
        stop = page.get_by_role("button", name="Stop")
        await expect(stop).to_be_visible()
        await stop.click()
        await expect(reply.locator(".body")).to_have_text("first answer")
        await expect(reply).not_to_have_attribute("aria-busy", "true")
        await expect(reply.locator(".versions")).to_have_count(0)
        await expect(stop).to_be_hidden()
        await expect(page.locator(".msg.me")).to_have_text(["question"])
