"""The conversation list on the page without sign-in (the default, loopback): New keeps the old
conversation in the list; pick, search, rename, export and delete (after a confirmation),
in a real Chromium against a real gateway, with the keyboard where a person would use it, on a
desktop (the list beside the chat) and a phone (the list behind the Chats button)."""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

from support.axe import axe_violations
from support.browser import SIZES, BrowserSession, at_size, browser, open_chat, send, show_list
from support.web_harness import StartGateway

pytestmark = pytest.mark.browser
__all__ = ["browser"]


async def _downloaded(download: Any) -> str:
    """The downloaded file's text (``save_as``: the worker's Chromium is connected to, not launched,
    so the download has no local ``path``)."""
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / download.suggested_filename
        await download.save_as(target)
        return await asyncio.to_thread(target.read_text, "utf-8")


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_new_keeps_the_old_conversation_in_the_list_and_picking_it_brings_it_back(
    start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = await open_chat(await at_size(browser.page, size), gateway.port)
    await show_list(page)
    welcome = page.locator("#welcome")
    await expect(welcome.locator("h2")).to_have_text("Hello! What shall we work on?")
    await expect(page.locator("#list-status")).to_have_text("Your conversations will be listed here.")
    await send(page, "first conversation")
    await expect(welcome).to_be_hidden()
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(["echo: first conversation"])
    await expect(page.locator("#conversations a")).to_have_text(["first conversation"])
    await page.click("#new")
    await expect(page.locator(".msg.me, .msg.bot")).to_have_count(0)
    await expect(page.locator(".msg.notice")).to_have_count(0)  # no "Started a new conversation" noise
    await expect(welcome).to_be_visible()
    await send(page, "second conversation")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(["echo: second conversation"])
    links = page.locator("#conversations a")
    await expect(links).to_have_text(["second conversation", "first conversation"])
    await expect(links.first).to_have_attribute("aria-current", "page")

    await show_list(page)
    await links.nth(1).click()
    await expect(page.locator(".msg.me")).to_have_text(["first conversation"])
    await expect(page.locator(".msg.bot")).to_have_text(["echo: first conversation"])
    await expect(page.locator("#status")).to_have_text("connected")
    await page.reload()  # the list and the picked conversation survive a reload
    await expect(page.locator("#status")).to_have_text("connected")
    await expect(page.locator(".msg.me")).to_have_text(["first conversation"])
    await expect(links).to_have_text(["second conversation", "first conversation"])

    await show_list(page)
    await page.fill("#search", "SECOND")
    await expect(links).to_have_text(["second conversation"])
    await page.fill("#search", "nothing like it")
    await expect(page.locator("#list-status")).to_have_text("No conversation matches.")


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_a_message_not_yet_delivered_is_still_delivered_after_new(
    start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    held = {"on": False}

    async def relay(ws: Any) -> None:  # the page's socket, through a switch that can hold its messages
        server = ws.connect_to_server()

        def to_server(message: str | bytes) -> None:
            if not (held["on"] and isinstance(message, str) and json.loads(message).get("type") == "message"):
                server.send(message)

        ws.on_message(to_server)
        server.on_message(lambda message: ws.send(message))

    await browser.page.route_web_socket(re.compile(r".*/ws$"), relay)
    page = await open_chat(await at_size(browser.page, size), gateway.port)
    await send(page, "hello")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_count(1)
    held["on"] = True
    await send(page, "typed before new")
    await expect(page.locator(".msg.me.pending")).to_have_count(1)
    held["on"] = False  # dropped on its way: nothing resends it on this socket until a reconnect
    await page.click("#new")  # its conversation is left behind; a socket of its own delivers it
    links = page.locator("#conversations a")
    await expect(links).to_have_count(1)
    await show_list(page)
    await links.first.click()
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(["echo: hello", "echo: typed before new"])


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_rename_export_and_delete_from_the_list_with_the_keyboard(
    tmp_path: Path, start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = await open_chat(await at_size(browser.page, size), gateway.port)
    await send(page, "keep this one")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_count(1)
    await page.click("#new")
    await send(page, "delete this one")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_count(1)
    links = page.locator("#conversations a")
    await expect(links).to_have_text(["delete this one", "keep this one"])

    keep = page.locator('#conversations li:has(a:text("keep this one"))')
    await show_list(page)
    await keep.locator("summary").focus()
    await page.keyboard.press("Enter")
    await keep.get_by_role("button", name="Rename").click()
    field = page.get_by_role("textbox", name=re.compile("^New name for"))
    await expect(field).to_be_focused()
    await page.keyboard.press("Control+A")
    await page.keyboard.type("Kept")
    await page.keyboard.press("Enter")
    await expect(links).to_have_text(["delete this one", "Kept"])
    await expect(page.locator('#conversations a:text("Kept")')).to_be_focused()

    kept = page.locator('#conversations li:has(a:text("Kept"))')
    await kept.locator("summary").click()
    async with page.expect_download() as md_download:
        await kept.get_by_role("button", name="Export Markdown").click()
    md = await _downloaded(await md_download.value)
    assert md.startswith("# Kept\n") and "keep this one" in md and "echo: keep this one" in md
    await kept.locator("summary").click()
    async with page.expect_download() as json_download:
        await kept.get_by_role("button", name="Export JSON").click()
    doc = json.loads(await _downloaded(await json_download.value))
    assert [i["text"] for i in doc["items"]] == ["keep this one", "echo: keep this one"]

    doomed = page.locator('#conversations li:has(a:text("delete this one"))')
    await doomed.locator("summary").click()
    await doomed.get_by_role("button", name="Delete").click()
    dialog = page.locator("dialog#confirm")
    await expect(dialog).to_be_visible()
    await expect(page.locator("#confirm-no")).to_be_focused()
    await page.keyboard.press("Escape")  # cancelled: nothing deleted
    await expect(dialog).to_be_hidden()
    await expect(links).to_have_count(2)
    await doomed.locator("summary").click()
    await doomed.get_by_role("button", name="Delete").click()
    await page.click("#confirm-yes")
    await expect(links).to_have_text(["Kept"])
    await expect(page.locator(".msg.me, .msg.bot")).to_have_count(0)  # it was open: a new one is
    await page.reload()
    await expect(links).to_have_text(["Kept"])
    await show_list(page)
    assert await axe_violations(page) == []
    await page.screenshot(path=str(tmp_path / "list.png"))


async def _tab_to(page: Any, selector: str, text: str | None = None, limit: int = 40) -> None:
    """Press Tab until the focus is on ``selector`` (with ``text``, if given)."""
    for _ in range(limit):
        if await page.evaluate(
            "([s, t]) => { const e = document.activeElement;"
            " return !!e && e.matches(s) && (t === null || e.textContent.trim() === t); }",
            [selector, text],
        ):
            return
        await page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector} {text or ''}")


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_keyboard_only_send_new_and_back_through_the_list(
    start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = await open_chat(await at_size(browser.page, size), gateway.port)
    await _tab_to(page, "#text")
    await page.keyboard.type("by keyboard")
    await page.keyboard.press("Enter")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(["echo: by keyboard"])
    await _tab_to(page, "#new")
    await page.keyboard.press("Enter")
    await expect(page.locator("#text")).to_be_focused()
    await page.keyboard.type("second")
    await page.keyboard.press("Enter")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(["echo: second"])
    await expect(page.locator("#conversations a")).to_have_count(2)
    if size == "phone":  # the list is behind the Chats button
        await _tab_to(page, "#chats-toggle")
        await page.keyboard.press("Enter")
        await expect(page.locator("#search")).to_be_focused()
    await _tab_to(page, "#conversations a", "by keyboard")
    await page.keyboard.press("Enter")
    await expect(page.locator(".msg.me")).to_have_text(["by keyboard"])
    await _tab_to(page, ".msg.bot .tool.copy-reply")  # the bubble's tools are reachable too
    await expect(page.locator(".msg.bot .tool.copy-reply")).to_be_visible()
    await _tab_to(page, ".msg.bot .tool.regenerate")
    await page.keyboard.press("Enter")  # a second answer, by keyboard
    await expect(page.locator(".msg.bot .versions .count")).to_have_text("2/2")
