"""A real Chromium (Debian's /usr/bin/chromium) driven by Playwright, for the web chat page tests.

No browser is downloaded: Playwright's bundled node driver launches the system Chromium.
Without /usr/bin/chromium the tests skip locally but fail in CI (CI=true), which must run them.
Every request the page makes to a host other than 127.0.0.1 is aborted and recorded, and the
fixture fails the test at teardown if there was one: the page must work offline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import pytest_asyncio

from support.loop_guard import outlive_tests

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
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
"""The two sizes every screen of the page is tried at (issue 34)."""

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
    """A Chromium browser context, its first page, and what the page asked for."""

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


SERVER_START_TIMEOUT = 60.0


@pytest.fixture(scope="session")
def chromium_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Chromium per test worker, launched by Playwright's own ``launch-server`` (the same
    launch, flags and rendering as ``launch``): its WebSocket endpoint. The browser is not
    launched again for every test; each test gets a new page in a context emptied after the
    last test (``ReusedContext``), or fresh contexts of its own (``browsers``)."""
    _chromium_or_skip()
    proc, endpoint = launch_server(tmp_path_factory.mktemp("chromium"))
    try:
        yield endpoint
    finally:
        stop_group(proc)


def launch_server(folder: Path) -> tuple[subprocess.Popen[str], str]:
    """Playwright's ``launch-server`` for the system Chromium, in a process group of its own; its
    WebSocket endpoint (what it prints first)."""
    config = folder / "launch.json"
    config.write_text(json.dumps({"executablePath": str(CHROMIUM), "headless": True, "args": CHROMIUM_ARGS}))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "playwright",
            "launch-server",
            "--browser",
            "chromium",
            "--config",
            str(config),
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the node driver and Chromium go with it
    )
    assert proc.stdout is not None
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(SERVER_START_TIMEOUT)
    endpoint = first[0].strip() if first else ""
    if not endpoint.startswith("ws://"):
        stop_group(proc)
        raise AssertionError(f"playwright launch-server printed {first!r} (exit {proc.poll()})")
    return proc, endpoint


def stop_group(proc: subprocess.Popen[str]) -> None:
    """End the launch server's whole process group. ``python -m playwright`` runs the node driver
    as a child, which runs Chromium: terminating the Python process alone left both running, and
    a day of test runs left dozens of Chromiums on the machine."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # children that outlived their parent
        return


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def connected_chromium(chromium_server: str) -> AsyncIterator[Any]:
    """The worker's Chromium, connected once for the whole run. Each ``async_playwright()``
    starts Playwright's node driver, ~0.44 s of CPU: once a test, that was ~45 CPU-seconds of a
    run. Tests share the run's event loop (``asyncio_default_test_loop_scope``), so they can
    share this connection too."""
    from playwright.async_api import async_playwright

    before = asyncio.all_tasks()
    async with async_playwright() as pw:
        shared = await pw.chromium.connect(chromium_server)
        outlive_tests(before)  # the driver's and the connection's readers
        try:
            yield shared
        finally:
            await shared.close()  # a connected browser: only disconnects, the worker's Chromium stays


class ReusedContext:
    """One browser context for the worker's single-browser tests, emptied between them.

    A fresh context costs ~1.1 s of Chromium CPU even for about:blank (its first renderer); a
    new page in a context that lives on costs about half. Each test still gets a new page (its
    handlers, routes, init scripts, viewport and emulation go with it), and the context's
    cookies, permissions and the storage of every origin a test visited are cleared after it,
    so a test starts as in a new profile."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.session: BrowserSession | None = None
        self.origins: set[str] = set()

    async def guard(self, route: Any) -> None:
        session = self.session or BrowserSession(self.context, None)  # between tests: still refused
        await _only_local(session, route)

    async def open(self) -> BrowserSession:
        page = await self.context.new_page()
        session = self.session = BrowserSession(self.context, page)
        page.on("response", lambda r: _record_failure(session, r))
        return session

    def watch(self, page: Any) -> None:
        """Every page of the context (a test's second tab too) reports the origins it visits."""
        page.on("framenavigated", self._visited)

    def _visited(self, frame: Any) -> None:
        origin = urlsplit(frame.url)
        if origin.scheme in ("http", "https"):
            self.origins.add(f"{origin.scheme}://{origin.netloc}")

    async def empty(self) -> None:
        """Close every page of the test and forget what it left in the profile."""
        pages = list(self.context.pages)
        if self.origins:
            cdp = await self.context.new_cdp_session(pages[0] if pages else await self.context.new_page())
            for origin in sorted(self.origins):
                await cdp.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"})
            await cdp.detach()
            self.origins.clear()
        for page in list(self.context.pages):
            await page.close()
        await self.context.clear_cookies()
        await self.context.clear_permissions()
        self.session = None


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def reused_context(connected_chromium: Any) -> AsyncIterator[ReusedContext]:
    """The worker's ``ReusedContext``."""
    context = await connected_chromium.new_context(viewport=SIZES["desktop"])
    context.set_default_timeout(TIMEOUT_MS)
    reused = ReusedContext(context)
    context.on("page", reused.watch)
    await context.route("**/*", reused.guard)
    await context.add_init_script(RECORD_PAGE)
    try:
        yield reused
    finally:
        await context.close()


@pytest.fixture
async def browser(reused_context: ReusedContext) -> AsyncIterator[BrowserSession]:
    from playwright.async_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    session = await reused_context.open()
    try:
        yield session
    finally:
        await reused_context.empty()
    assert not session.foreign, f"the page asked for other hosts: {session.foreign}"


async def new_session(shared: Any) -> BrowserSession:
    """A fresh context (its own cookies and storage, like a new profile) on the worker's
    Chromium, with the offline guard and the draft recorder, and its first page."""
    context = await shared.new_context(viewport=SIZES["desktop"])
    context.set_default_timeout(TIMEOUT_MS)
    page = await context.new_page()
    session = BrowserSession(context, page)
    await context.route("**/*", lambda route: _only_local(session, route))
    page.on("response", lambda r: _record_failure(session, r))
    await page.add_init_script(RECORD_PAGE)
    return session


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


async def at_size(page: Any, size: str) -> Any:
    """The page at one of ``SIZES``."""
    await page.set_viewport_size(SIZES[size])
    return page


async def show_list(page: Any) -> None:
    """Make the conversation list visible: beside the chat on a desktop, behind the Chats button
    on a phone (which closes it again when a conversation is picked)."""
    toggle = page.locator("#chats-toggle")
    if await toggle.is_visible() and await toggle.get_attribute("aria-expanded") != "true":
        await toggle.click()
    await page.locator("#sidebar").wait_for(state="visible")
