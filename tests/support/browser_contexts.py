"""More than one browser for a test: each a separate browser context on the worker's Chromium
(its own cookies and storage, like a separate profile), with the same offline guard as
``support.browser``'s fixture."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from support.browser import TIMEOUT_MS, BrowserSession, new_session

OpenBrowser = Callable[[], Awaitable[BrowserSession]]


@pytest.fixture
async def browsers(connected_chromium: Any) -> AsyncIterator[OpenBrowser]:
    """``await browsers()``: a new browser (context) each call; all closed and checked at teardown."""
    from playwright.async_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    opened: list[BrowserSession] = []
    async with contextlib.AsyncExitStack() as stack:

        async def launch() -> BrowserSession:
            session = await new_session(connected_chromium)
            stack.push_async_callback(session.context.close)
            opened.append(session)
            return session

        yield launch
    for session in opened:
        assert not session.foreign, f"the page asked for other hosts: {session.foreign}"
