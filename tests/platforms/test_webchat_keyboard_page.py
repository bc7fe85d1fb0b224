"""The whole web chat by keyboard alone (issue 34): focus the composer, send, start a new
conversation, approve a shell command, open the conversation list, switch back, regenerate the
answer. Every element the Tab key lands on on the way must show that it has the focus (an
outline or a ring, on an element a person can see), not only the ones the flow stops at.
Real Chromium, real gateway, the real shell tool behind the approval broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.browser import SIZES, BrowserSession, at_size, browser, open_chat
from support.web_harness import StartGateway, web_config

pytestmark = pytest.mark.browser
__all__ = ["browser"]

# Why the focused element would not be seen, or "" when it shows its focus.
FOCUS_PROBLEM = """() => {
  const e = document.activeElement;
  if (!e || e === document.body) return 'outside';  // past the page's last element: the browser's own
  const text = (e.textContent || '').trim().slice(0, 30);
  const name = e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + ' "' + text + '"';
  if (!e.matches(':focus-visible')) return name + ' is focused but not :focus-visible';
  const s = getComputedStyle(e);
  const ring = (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== 'none';
  if (!ring) return name + ' has no outline or ring';
  const r = e.getBoundingClientRect();
  if (r.width === 0 || r.height === 0) return name + ' has no size';
  for (let n = e; n; n = n.parentElement) {
    const c = getComputedStyle(n);
    if (c.visibility === 'hidden' || c.display === 'none' || parseFloat(c.opacity) === 0)
      return name + ' is inside an invisible ' + n.tagName.toLowerCase() + '.' + n.className;
  }
  return '';
}"""


class Keyboard:
    """Tab, Enter and typing, checking at every Tab stop that the focus is visible."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.stops: list[str] = []

    async def tab_to(self, selector: str, text: str | None = None, limit: int = 60) -> None:
        for _ in range(limit):
            await self.page.keyboard.press("Tab")
            problem = await self.page.evaluate(FOCUS_PROBLEM)
            if problem == "outside":
                continue
            assert problem == "", f"after Tab on the way to {selector}: {problem}"
            if await self.page.evaluate(
                "([s, t]) => { const e = document.activeElement;"
                " return !!e && e.matches(s) && (t === null || e.textContent.trim() === t); }",
                [selector, text],
            ):
                self.stops.append(selector)
                return
        raise AssertionError(f"Tab never reached {selector} {text or ''}")

    async def press(self, key: str) -> None:
        await self.page.keyboard.press(key)

    async def type(self, text: str) -> None:
        await self.page.keyboard.type(text)


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_a_whole_flow_by_keyboard_alone_with_the_focus_always_visible(
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
    keys = Keyboard(page)
    bot = page.locator(".msg.bot:not(.draft)")

    await keys.tab_to("#text")
    await keys.type("first by keyboard")
    await keys.press("Enter")
    await expect(bot).to_have_text(["echo: first by keyboard"])

    await keys.tab_to("#new")
    await keys.press("Enter")
    await expect(page.locator("#text")).to_be_focused()
    await keys.type("!sh rm -rf ./x")
    await keys.press("Enter")
    card = page.locator(".msg.prompt")
    await expect(card.get_by_role("button", name="Approve once")).to_be_visible()
    await keys.tab_to(".msg.prompt button", "Approve once")
    await keys.press("Enter")
    await expect(card.locator(".outcome")).to_contain_text("Approved")
    await expect(bot.last).to_contain_text("exit code 0")
    assert not (workdir / "x").exists()

    if size == "phone":  # the list is behind the Chats button
        await keys.tab_to("#chats-toggle")
        await keys.press("Enter")
        await expect(page.locator("#search")).to_be_focused()
    await keys.tab_to("#conversations a", "first by keyboard")
    await keys.press("Enter")
    await expect(page.locator(".msg.me")).to_have_text(["first by keyboard"])
    await expect(bot).to_have_text(["echo: first by keyboard"])

    await keys.tab_to(".msg.bot .tool.regenerate")
    await keys.press("Enter")
    await expect(bot.locator(".versions .count")).to_have_text("2/2")
    await expect(page.locator(".msg.me")).to_have_text(["first by keyboard"])  # asked again, not shown twice
    await keys.tab_to(".msg.bot .versions button", None)
    await keys.press("Enter")
    await expect(bot.locator(".versions .count")).to_have_text("1/2")
