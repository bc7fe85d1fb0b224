"""More than one browser for a test: each a separate browser context on the worker's Chromium
(its own cookies and storage, like a separate profile), with the same offline guard as
``support.browser``'s fixture."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from support.browser import TIMEOUT_MS, BrowserSession, new_session

OpenBrowser = Callable[[], Awaitable[BrowserSession]]


@pytest.fixture
async def browsers(chromium_server: str) -> AsyncIterator[OpenBrowser]:
    """``await browsers()``: a new browser (context) each call; all closed and checked at teardown."""
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=TIMEOUT_MS)
    opened: list[BrowserSession] = []
    async with contextlib.AsyncExitStack() as stack:
        pw = await stack.enter_async_context(async_playwright())
        shared = await pw.chromium.connect(chromium_server)
        stack.push_async_callback(shared.close)  # disconnects; the worker's Chromium stays

        async def launch() -> BrowserSession:
            session = await new_session(shared)
            stack.push_async_callback(session.context.close)
            opened.append(session)
            return session

        yield launch
    for session in opened:
        assert not session.foreign, f"the page asked for other hosts: {session.foreign}"
