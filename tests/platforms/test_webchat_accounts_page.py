"""Accounts in a real Chromium against a real gateway: signing in on the sign-in page, the
conversation list and server history (also in a second browser), two users who cannot see each
other's conversations, an approval card that survives a reload, an admin who revokes, phone width."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from chatgate.store.sqlite import SqliteStore
from support.accounts_harness import User, accounts_config, seed
from support.browser import SIZES, at_size, send
from support.browser_contexts import OpenBrowser, browsers
from support.web_harness import StartGateway

pytestmark = pytest.mark.browser
__all__ = ["browsers"]


async def sign_in_page(page: Any, port: int | None, user: User) -> Any:
    from playwright.async_api import expect

    await page.goto(f"http://127.0.0.1:{port}/")
    await expect(page).to_have_url(re.compile(r"/signin$"))
    await page.fill("#signin-token", user.token)
    await page.press("#signin-token", "Enter")
    await expect(page.locator("#status")).to_have_text("connected")
    await expect(page.locator("#who")).to_have_text(user.account.name)
    return page


async def test_signing_in_lists_conversations_with_titles_and_history_follows_to_a_second_browser(
    tmp_path: Path, start_gateway: StartGateway, browsers: OpenBrowser
) -> None:
    from playwright.async_api import expect

    db = tmp_path / "accounts.db"
    users = await seed(db, ("ann", "user"))
    gateway = await start_gateway(accounts_config(), store=SqliteStore(db))
    first = await browsers()
    page = await sign_in_page(first.page, gateway.port, users["ann"])
    assert "chatgate_session" not in await page.evaluate("document.cookie")  # HttpOnly
    await send(page, "plan the **launch**")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_count(1)
    chats = page.locator("#conversations a")
    await expect(chats).to_have_text(["plan the **launch**"])
    await page.click("#new")
    await expect(page.locator(".msg.me, .msg.bot")).to_have_count(0)
    await send(page, "second topic")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(["echo: second topic"])
    await expect(chats).to_have_text(["second topic", "plan the **launch**"])
    await expect(page.locator("#conversations a[aria-current=page]")).to_have_text("second topic")

    await chats.filter(has_text="launch").click()
    await expect(page.locator(".msg.me")).to_have_text(["plan the **launch**"])
    await expect(page.locator(".msg.bot strong")).to_have_text("launch")  # rendered from server history

    other = await browsers()  # another device: no localStorage of the first
    page2 = await sign_in_page(other.page, gateway.port, users["ann"])
    await expect(page2.locator("#conversations a")).to_have_text(["second topic", "plan the **launch**"])
    await expect(page2.locator(".msg.me")).to_have_text(["second topic"])  # the latest, opened
    await page2.locator("#conversations a").filter(has_text="launch").click()
    await expect(page2.locator(".msg.me")).to_have_text(["plan the **launch**"])
    await expect(page2.locator(".msg.bot:not(.draft)")).to_have_count(1)
    await page2.fill("#search", "second")
    await expect(page2.locator("#conversations a")).to_have_text(["second topic"])
    await page2.screenshot(path=str(tmp_path / "accounts-desktop.png"))


async def test_two_users_see_only_their_own_conversations(
    tmp_path: Path, start_gateway: StartGateway, browsers: OpenBrowser
) -> None:
    from playwright.async_api import expect

    db = tmp_path / "accounts.db"
    users = await seed(db, ("ann", "user"), ("bob", "user"))
    gateway = await start_gateway(accounts_config(), store=SqliteStore(db))
    ann = await sign_in_page((await browsers()).page, gateway.port, users["ann"])
    await send(ann, "ann's private note")
    await expect(ann.locator("#conversations a")).to_have_text(["ann's private note"])
    bob = await sign_in_page((await browsers()).page, gateway.port, users["bob"])
    await expect(bob.locator(".msg.me")).to_have_count(0)
    await send(bob, "bob here")
    await expect(bob.locator("#conversations a")).to_have_text(["bob here"])
    await bob.fill("#search", "private")
    await expect(bob.locator("#conversations a")).to_have_count(0)
    chat_id = await ann.evaluate("localStorage.getItem('chatgate.chat.ann')")
    status = await bob.evaluate(f"fetch('/api/conversations/{chat_id}/messages').then((r) => r.status)")
    assert status == 403


async def test_an_approval_card_survives_a_reload_when_signed_in(
    tmp_path: Path, start_gateway: StartGateway, browsers: OpenBrowser
) -> None:
    from playwright.async_api import expect

    db = tmp_path / "accounts.db"
    users = await seed(db, ("ann", "user"))
    workdir = tmp_path / "work"
    (workdir / "x").mkdir(parents=True)
    config = accounts_config()
    config = replace(config, tools=replace(config.tools, enabled=True, workdir=str(workdir)))
    gateway = await start_gateway(config, store=SqliteStore(db))
    page = await sign_in_page((await browsers()).page, gateway.port, users["ann"])
    await send(page, "!sh rm -rf ./x")
    card = page.locator(".msg.prompt")
    await card.locator("button", has_text="Approve once").click()
    await expect(card.locator(".outcome")).to_contain_text("Approved")
    await expect(page.locator(".msg.bot:not(.draft)").last).to_contain_text("exit code 0")
    await page.evaluate("localStorage.clear()")  # what is shown next comes from the server alone
    await page.reload()
    await expect(page.locator("#status")).to_have_text("connected")
    # This browser forgot its conversation, so it opens the latest one, from the server.
    await expect(card).to_have_count(1)
    await expect(card).to_contain_text("rm -rf ./x")
    await expect(card.locator(".outcome")).to_contain_text("Approved")
    await expect(card.locator("button")).to_have_count(0)


async def test_an_admin_revokes_a_user_in_the_page_and_their_page_goes_to_sign_in(
    tmp_path: Path, start_gateway: StartGateway, browsers: OpenBrowser
) -> None:
    from playwright.async_api import expect

    db = tmp_path / "accounts.db"
    users = await seed(db, ("root", "admin"), ("ann", "user"))
    gateway = await start_gateway(accounts_config(session_check_seconds=3600), store=SqliteStore(db))
    ann = await sign_in_page((await browsers()).page, gateway.port, users["ann"])
    await expect(ann.locator("#admin-open")).to_be_hidden()
    root = await sign_in_page((await browsers()).page, gateway.port, users["root"])
    await root.click("#admin-open")
    row = root.locator("#users tr[data-name=ann]")
    await expect(row).to_contain_text(users["ann"].token_id)
    await row.locator("button.revoke-user").click()
    await expect(root.locator("#admin-status")).to_have_text("Revoked user ann.")
    await expect(row).to_contain_text("(revoked)")
    await expect(ann).to_have_url(re.compile(r"/signin$"))
    await ann.fill("#signin-token", users["ann"].token)
    await ann.press("#signin-token", "Enter")
    await expect(ann.locator("#signin-error")).to_contain_text("not accepted")


async def test_phone_width_folds_the_conversation_list_behind_a_button(
    tmp_path: Path, start_gateway: StartGateway, browsers: OpenBrowser
) -> None:
    from playwright.async_api import expect

    db = tmp_path / "accounts.db"
    users = await seed(db, ("ann", "user"))
    gateway = await start_gateway(accounts_config(), store=SqliteStore(db))
    session = await browsers()
    await session.page.set_viewport_size({"width": 390, "height": 844})
    page = await sign_in_page(session.page, gateway.port, users["ann"])
    await send(page, "from my phone")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_count(1)
    await expect(page.locator("#sidebar")).to_be_hidden()
    toggle = page.locator("#chats-toggle")
    await expect(toggle).to_have_attribute("aria-expanded", "false")
    await toggle.click()
    await expect(page.locator("#sidebar")).to_be_visible()
    await expect(page.locator("#conversations a")).to_have_text(["from my phone"])
    await expect(toggle).to_have_attribute("aria-expanded", "true")
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    for selector in ("#text", "#send", "#new"):  # Stop shows only while a reply is written
        await expect(page.locator(selector)).to_be_in_viewport()
    await page.screenshot(path=str(tmp_path / "accounts-phone.png"))


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_an_admin_adds_a_user_by_keyboard_sees_the_token_once_and_the_user_signs_in_with_it(
    tmp_path: Path, start_gateway: StartGateway, browsers: OpenBrowser, size: str
) -> None:
    from playwright.async_api import expect

    db = tmp_path / "accounts.db"
    users = await seed(db, ("root", "admin"))
    gateway = await start_gateway(accounts_config(session_check_seconds=3600), store=SqliteStore(db))
    root = await sign_in_page(await at_size((await browsers()).page, size), gateway.port, users["root"])
    await root.click("#admin-open")
    await expect(root.locator("#new-user")).to_be_focused()
    await root.keyboard.type("Bea")
    await root.keyboard.press("Enter")
    await expect(root.locator("#admin-status")).to_have_text("Added user bea.")
    token = await root.locator("#new-token-value").inner_text()
    assert token.strip()
    await expect(root.locator("#users tr[data-name=bea]")).to_contain_text("user")
    await root.fill("#new-user", "bea")  # a second add of the same name is refused
    await root.press("#new-user", "Enter")
    await expect(root.locator("#admin-status")).to_have_text("there is already a user bea")
    await root.keyboard.press("Escape")  # closed: the token is gone from the page
    await expect(root.locator("#admin-screen")).to_be_hidden()
    await expect(root.locator("#new-token-value")).to_have_text("")
    await root.click("#admin-open")
    await expect(root.locator("#new-token")).to_be_hidden()

    bea = await at_size((await browsers()).page, size)
    await bea.goto(f"http://127.0.0.1:{gateway.port}/")
    await bea.fill("#signin-token", token.strip())
    await bea.press("#signin-token", "Enter")
    await expect(bea.locator("#who")).to_have_text("bea")
