"""The layouts a person met broken (issue 34, item 6), measured in a real Chromium at both sizes:
the header is one row (it wrapped to two in accounts mode on a phone), the composer's placeholder
is shown whole (a phone cut it to "Message (Shift+Enter: ne"), the sign-in card is centred (it
sat left of centre on a desktop), and nothing scrolls sideways."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chatgate.store.sqlite import SqliteStore
from support.accounts_harness import accounts_config, seed
from support.browser import SIZES, BrowserSession, at_size, browser, open_chat
from support.browser_contexts import OpenBrowser, browsers
from support.web_harness import StartGateway

pytestmark = pytest.mark.browser
__all__ = ["browser", "browsers"]

ONE_ROW = """() => {
  const shown = [...document.querySelectorAll('header > *')].filter((e) => e.offsetParent !== null);
  const tops = shown.map((e) => e.getBoundingClientRect());
  const rows = new Set(tops.map((r) => Math.round(r.top + r.height / 2)));
  return {count: shown.length, rows: Math.max(...rows) - Math.min(...rows)};
}"""
PLACEHOLDER_FITS = """() => {
  const box = document.getElementById('text');
  const style = getComputedStyle(box);
  const probe = document.createElement('span');
  probe.style.font = style.font;
  probe.style.whiteSpace = 'pre';
  probe.style.position = 'absolute';  // out of the body's grid: as wide as its text
  probe.textContent = box.placeholder;
  document.body.append(probe);
  const need = probe.getBoundingClientRect().width;
  probe.remove();
  const room = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return {placeholder: box.placeholder, need, room};
}"""


async def _check_chat_layout(page: Any, width: int) -> None:
    header = await page.evaluate(ONE_ROW)
    assert header["count"] >= 3 and header["rows"] <= 4, f"the header wraps: {header}"
    fit = await page.evaluate(PLACEHOLDER_FITS)
    assert fit["placeholder"].startswith("Message") and fit["need"] <= fit["room"], fit
    assert await page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_the_header_is_one_row_and_the_placeholder_is_whole_without_sign_in(
    start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    gateway = await start_gateway()
    page = await open_chat(await at_size(browser.page, size), gateway.port)
    await _check_chat_layout(page, SIZES[size]["width"])


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_signed_in_the_header_is_one_row_and_the_sign_in_card_is_centred(
    tmp_path: Path, start_gateway: StartGateway, browsers: OpenBrowser, size: str
) -> None:
    from playwright.async_api import expect

    db = tmp_path / "accounts.db"
    users = await seed(db, ("administrator.of.this.gateway", "admin"))
    gateway = await start_gateway(accounts_config(), store=SqliteStore(db))
    page = await at_size((await browsers()).page, size)
    await page.goto(f"http://127.0.0.1:{gateway.port}/")
    card = page.locator("#signin-form")
    await expect(card).to_be_visible()
    box = await card.bounding_box()
    assert box is not None
    left, right = box["x"], SIZES[size]["width"] - box["x"] - box["width"]
    assert abs(left - right) <= 2, f"the card is off centre: {left:.0f} px left, {right:.0f} px right"

    await page.fill("#signin-token", users["administrator.of.this.gateway"].token)
    await page.press("#signin-token", "Enter")
    await expect(page.locator("#status")).to_have_text("connected")
    await expect(page.locator("#admin-open")).to_be_visible()  # the widest header: an admin's
    await _check_chat_layout(page, SIZES[size]["width"])
