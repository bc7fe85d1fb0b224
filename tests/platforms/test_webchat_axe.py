"""axe-core over every screen of the web chat, light and dark, desktop and phone: no serious or
critical accessibility violation. Real Chromium against a real gateway, real conversations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chatgate.store.sqlite import SqliteStore
from support.accounts_harness import accounts_config, seed
from support.axe import axe_violations
from support.browser import SIZES, BrowserSession, browser, open_chat, send
from support.browser_contexts import OpenBrowser, browsers
from support.web_harness import StartGateway, web_config

pytestmark = pytest.mark.browser
__all__ = ["browser", "browsers"]

REPLY = "## Plan\n- one\n- two\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n\n```python\nprint('hi')\n```\n[docs](https://example.com)"


async def _check(page: Any, screen: str, problems: list[str]) -> None:
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        problems.extend(f"{screen} ({scheme}): {line}" for line in await axe_violations(page))


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_every_screen_without_accounts_has_no_serious_violation(
    tmp_path: Path, start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    from playwright.async_api import expect

    workdir = tmp_path / "work"
    (workdir / "x").mkdir(parents=True)
    gateway = await start_gateway(
        web_config(agent={"echo": {"chunk_delay_ms": 0}}, tools={"enabled": True, "workdir": str(workdir)})
    )
    page = browser.page
    await page.set_viewport_size(SIZES[size])
    await open_chat(page, gateway.port)
    problems: list[str] = []
    await _check(page, "welcome", problems)

    await send(page, REPLY)
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_count(1)
    await send(page, "!sh rm -rf ./x")
    await expect(page.locator(".msg.prompt button").first).to_be_visible()
    await page.locator(".msg.bot:not(.draft)").first.hover()
    await _check(page, "conversation with an approval card", problems)

    if size == "phone":
        await page.click("#chats-toggle")
    item = page.locator("#conversations li").first
    await item.locator("summary").click()
    await _check(page, "conversation menu", problems)
    await item.get_by_role("button", name="Delete").click()
    await expect(page.locator("dialog#confirm")).to_be_visible()
    await _check(page, "delete confirmation", problems)
    await page.keyboard.press("Escape")
    assert not problems, "\n".join(problems)


async def test_the_token_screen_has_no_serious_violation(
    start_gateway: StartGateway, browser: BrowserSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.async_api import expect

    monkeypatch.setenv("WEB_TOKEN", "s3cret")
    gateway = await start_gateway(web_config(platforms={"web": {"access_token_env": "WEB_TOKEN"}}))
    page = browser.page
    await page.goto(f"http://127.0.0.1:{gateway.port}/")
    await expect(page.locator("#token-screen")).to_be_visible()
    problems: list[str] = []
    await _check(page, "token screen", problems)
    assert not problems, "\n".join(problems)


async def test_sign_in_chat_and_admin_screens_have_no_serious_violation(
    tmp_path: Path, start_gateway: StartGateway, browsers: OpenBrowser
) -> None:
    from playwright.async_api import expect

    db = tmp_path / "accounts.db"
    users = await seed(db, ("root", "admin"))
    gateway = await start_gateway(accounts_config(session_check_seconds=3600), store=SqliteStore(db))
    page = (await browsers()).page
    problems: list[str] = []
    for size in ("desktop", "phone"):
        await page.set_viewport_size(SIZES[size])
        await page.goto(f"http://127.0.0.1:{gateway.port}/signin")
        await _check(page, f"sign-in ({size})", problems)
    await page.set_viewport_size(SIZES["desktop"])
    await page.fill("#signin-token", users["root"].token)
    await page.press("#signin-token", "Enter")
    await expect(page.locator("#status")).to_have_text("connected")
    await send(page, "hello")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_count(1)
    await _check(page, "signed-in chat", problems)
    await page.click("#admin-open")
    await page.fill("#new-user", "bea")
    await page.press("#new-user", "Enter")
    await expect(page.locator("#new-token")).to_be_visible()
    await _check(page, "admin users with a new token", problems)
    assert not problems, "\n".join(problems)
