"""The signed-in web chat (accounts mode) at desktop and phone size against committed references.

The sign-in page, then a signed-in user with two conversations: the list with its search box
(a sidebar on the desktop, a closed drawer on the phone) and a rendered reply. Regenerate with
``CHATGATE_UPDATE_SCREENSHOTS=1 .venv/bin/pytest tests/platforms/test_webchat_accounts_screenshots.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chatgate.store.sqlite import SqliteStore
from support.accounts_harness import accounts_config, seed
from support.browser import SIZES, send
from support.browser_contexts import OpenBrowser, browsers
from support.screenshots import check_screenshot
from support.web_harness import StartGateway

pytestmark = pytest.mark.browser
__all__ = ["browsers"]


@pytest.mark.parametrize("size", list(SIZES))
async def test_the_sign_in_page_and_the_signed_in_page_look_like_their_references(
    size: str, tmp_path: Path, start_gateway: StartGateway, browsers: OpenBrowser
) -> None:
    from playwright.async_api import expect

    db = tmp_path / "accounts.db"
    users = await seed(db, ("ann", "user"))
    gateway = await start_gateway(accounts_config(), store=SqliteStore(db))
    page = (await browsers()).page
    await page.set_viewport_size(SIZES[size])
    await page.emulate_media(color_scheme="light", reduced_motion="reduce")
    await page.goto(f"http://127.0.0.1:{gateway.port}/")
    await expect(page).to_have_url(re.compile(r"/signin$"))
    problems = [check_screenshot(await _shot(page), f"accounts-{size}-signin", tmp_path)]

    await page.fill("#signin-token", users["ann"].token)
    await page.press("#signin-token", "Enter")
    await expect(page.locator("#status")).to_have_text("connected")
    await send(page, "plan the **launch**")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_count(1)
    await page.click("#new")
    await expect(page.locator(".msg.me, .msg.bot")).to_have_count(0)
    await send(page, "list:\n\n1. draft\n   - outline\n2. review")
    await expect(page.locator(".msg.bot:not(.draft) li")).to_have_count(3)
    await expect(page.locator("#conversations a")).to_have_count(2)
    await page.evaluate("document.activeElement.blur()")
    problems.append(check_screenshot(await _shot(page), f"accounts-{size}-chat", tmp_path))
    found = [p for p in problems if p]
    assert not found, "\n".join(found)


async def _shot(page: object) -> bytes:
    png: bytes = await page.screenshot(animations="disabled", caret="hide", scale="css")  # type: ignore[attr-defined]
    return png
