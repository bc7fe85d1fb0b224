"""axe-core over the screens test_webchat_axe.py does not reach, at both sizes and in both themes
(issue 34): tool steps opened under an answered approval card, a conversation being renamed, a
failed reply with Retry, an upload in progress and a failed one, and in accounts mode the
signed-in chat, the phone's conversation drawer and the admin page with a new user's token.
No serious or critical violation. Real Chromium against a real gateway."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from chatgate.store.sqlite import SqliteStore
from support.accounts_harness import accounts_config, seed
from support.axe import axe_violations
from support.browser import SIZES, BrowserSession, at_size, browser, open_chat, send, show_list
from support.browser_contexts import OpenBrowser, browsers
from support.web_harness import StartGateway, web_config

pytestmark = pytest.mark.browser
__all__ = ["browser", "browsers"]


async def _check(page: Any, screen: str, problems: list[str]) -> None:
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        problems.extend(f"{screen} ({scheme}): {line}" for line in await axe_violations(page))
    await page.emulate_media(color_scheme="light")


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_open_tool_steps_and_a_rename_have_no_serious_violation(
    tmp_path: Path, start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    from playwright.async_api import expect

    workdir = tmp_path / "work"
    (workdir / "x").mkdir(parents=True)
    tools = {"enabled": True, "workdir": str(workdir)}
    gateway = await start_gateway(web_config(agent={"echo": {"chunk_delay_ms": 0}}, tools=tools))
    page = await open_chat(await at_size(browser.page, size), gateway.port)
    problems: list[str] = []
    await send(page, "!sh rm -rf ./x")
    card = page.locator(".msg.prompt")
    await card.get_by_role("button", name="Approve once").click()
    await expect(card.locator(".outcome")).to_contain_text("Approved")
    steps = page.locator(".msg.bot:not(.draft) details.steps")
    await steps.locator("summary").click()
    await expect(steps.locator("li")).to_have_text(["shell rm -rf ./x — done"])
    await _check(page, "tool steps opened under the answered card", problems)

    await show_list(page)
    item = page.locator("#conversations li").first
    await item.locator("summary").click()
    await item.get_by_role("button", name="Rename").click()
    await expect(page.get_by_role("textbox", name=re.compile("^New name for"))).to_be_focused()
    await _check(page, "a conversation being renamed", problems)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_a_failed_reply_with_retry_has_no_serious_violation(
    start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    from playwright.async_api import expect

    config = web_config(agent={"echo": {"chunk_delay_ms": 2000}, "turn_timeout_seconds": 0.5})
    gateway = await start_gateway(config)
    page = await open_chat(await at_size(browser.page, size), gateway.port)
    await send(page, "too slow")
    await expect(page.locator(".msg.failure").get_by_role("button", name="Retry")).to_be_visible()
    problems: list[str] = []
    await _check(page, "a failed reply", problems)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_an_upload_in_progress_and_a_failed_one_have_no_serious_violation(
    start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = await open_chat(await at_size(browser.page, size), gateway.port)
    problems: list[str] = []
    held: list[Any] = []  # the upload's request, held: the chip stays in progress
    await page.route("**/uploads?*", lambda route: held.append(route))
    big = {"name": "big.bin", "mimeType": "application/octet-stream", "buffer": bytes(64 * 1024)}
    await page.set_input_files("#file", files=[big])
    await expect(page.get_by_role("progressbar", name="Uploading big.bin")).to_be_visible()
    await _check(page, "an upload in progress", problems)
    await page.get_by_role("button", name="Cancel uploading big.bin").click()
    await expect(page.locator(".file-chip")).to_have_count(0)

    await page.unroute("**/uploads?*")
    refused = {"code": "storage_unavailable", "message": "storage is down"}
    await page.route("**/uploads?*", lambda route: route.fulfill(status=503, json=refused))
    note = {"name": "note.txt", "mimeType": "text/plain", "buffer": b"retry me\n"}
    await page.set_input_files("#file", files=[note])
    await expect(page.locator(".file-chip.failed")).to_contain_text("note.txt — storage is down")
    await _check(page, "a failed upload", problems)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_signed_in_chat_drawer_and_admin_have_no_serious_violation(
    tmp_path: Path, start_gateway: StartGateway, browsers: OpenBrowser, size: str
) -> None:
    from playwright.async_api import expect

    db = tmp_path / "accounts.db"
    users = await seed(db, ("root", "admin"))
    gateway = await start_gateway(accounts_config(session_check_seconds=3600), store=SqliteStore(db))
    page = await at_size((await browsers()).page, size)
    problems: list[str] = []
    await page.goto(f"http://127.0.0.1:{gateway.port}/signin")
    await page.fill("#signin-token", users["root"].token)
    await page.press("#signin-token", "Enter")
    await expect(page.locator("#status")).to_have_text("connected")
    await send(page, "hello")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_count(1)
    await _check(page, "signed-in chat", problems)
    await show_list(page)
    await _check(page, "signed-in conversation list", problems)
    if size == "phone":
        await page.click("#chats-toggle")  # the drawer closed again: the header's buttons
    await page.click("#admin-open")
    await page.fill("#new-user", "bea")
    await page.press("#new-user", "Enter")
    await expect(page.locator("#new-token")).to_be_visible()
    await _check(page, "admin users with a new token", problems)
    assert not problems, "\n".join(problems)
