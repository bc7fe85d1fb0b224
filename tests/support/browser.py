"""A real Chromium (Debian's /usr/bin/chromium) driven by Playwright, for the web chat page tests.

No browser is downloaded: Playwright's bundled node driver launches the system Chromium.
Without /usr/bin/chromium the tests skip locally but fail in CI (CI=true), which must run them.
Every request the page makes to a host other than 127.0.0.1 is aborted and recorded, and the
fixture fails the test at teardown if there was one: the page must work offline.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 20_000

# Records every text a draft bubble showed, and whether the typing indicator was ever shown,
# so a state that lives briefly is still observed.
RECORD_PAGE = """
window.__drafts = [];
window.__typingSeen = false;
new MutationObserver(() => {
  for (const el of document.querySelectorAll('.msg.draft')) {
    if (el.textContent && window.__drafts[window.__drafts.length - 1] !== el.textContent)
      window.__drafts.push(el.textContent);
  }
  const typing = document.getElementById('typing');
  if (typing && !typing.hidden) window.__typingSeen = true;
}).observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
"""


@dataclass
class BrowserSession:
    """A persistent Chromium context, its first page, and what the page asked for."""

    context: Any
    page: Any
    foreign: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def _chromium_or_skip() -> None:
    if CHROMIUM.exists():
        return
    reason = f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the browser tests, but {reason}")
    pytest.skip(reason)


async def _only_local(session: BrowserSession, route: Any) -> None:
    url = route.request.url
    if urlsplit(url).hostname == "127.0.0.1" or url.startswith(("data:", "blob:", "about:")):
        await route.continue_()
    else:
        session.foreign.append(url)
        await route.abort()


def _record_failure(session: BrowserSession, response: Any) -> None:
    if response.status >= 400:
        session.failed.append(f"{response.status} {response.url}")


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[BrowserSession]:
    _chromium_or_skip()
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=TIMEOUT_MS)
    async with async_playwright() as pw:
        context = await pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 800},
        )
        context.set_default_timeout(TIMEOUT_MS)
        page = context.pages[0] if context.pages else await context.new_page()
        session = BrowserSession(context, page)
        await context.route("**/*", lambda route: _only_local(session, route))
        page.on("response", lambda r: _record_failure(session, r))
        await page.add_init_script(RECORD_PAGE)
        try:
            yield session
        finally:
            await context.close()
        assert not session.foreign, f"the page asked for other hosts: {session.foreign}"


@pytest.fixture
async def browser_page(browser: BrowserSession) -> Any:
    return browser.page


async def open_chat(page: Any, port: int | None) -> Any:
    """The gateway's page, once its socket is connected."""
    from playwright.async_api import expect

    await page.goto(f"http://127.0.0.1:{port}/")
    await expect(page.locator("#status")).to_have_text("connected")
    return page


async def send(page: Any, text: str) -> None:
    """Type ``text`` into the composer and press Enter (newlines become Shift+Enter)."""
    await page.fill("#text", text)
    await page.press("#text", "Enter")
