"""More than one browser for a test: each a separate Chromium profile (its own cookies and
storage), with the same offline guard as ``support.browser``'s fixture."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from support.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    RECORD_PAGE,
    TIMEOUT_MS,
    BrowserSession,
    _chromium_or_skip,
    _only_local,
    _record_failure,
)

OpenBrowser = Callable[[], Awaitable[BrowserSession]]


@pytest.fixture
async def browsers(tmp_path: Path) -> AsyncIterator[OpenBrowser]:
    """``await browsers()``: a new browser (profile) each call; all closed and checked at teardown."""
    _chromium_or_skip()
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=TIMEOUT_MS)
    opened: list[BrowserSession] = []
    async with contextlib.AsyncExitStack() as stack:
        pw = await stack.enter_async_context(async_playwright())

        async def launch() -> BrowserSession:
            context = await pw.chromium.launch_persistent_context(
                str(tmp_path / f"profile-{len(opened)}"),
                executable_path=str(CHROMIUM),
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1280, "height": 800},
            )
            stack.push_async_callback(context.close)
            context.set_default_timeout(TIMEOUT_MS)
            page = context.pages[0] if context.pages else await context.new_page()
            session = BrowserSession(context, page)
            await context.route("**/*", lambda route: _only_local(session, route))
            page.on("response", lambda r: _record_failure(session, r))
            await page.add_init_script(RECORD_PAGE)
            opened.append(session)
            return session

        yield launch
    for session in opened:
        assert not session.foreign, f"the page asked for other hosts: {session.foreign}"
