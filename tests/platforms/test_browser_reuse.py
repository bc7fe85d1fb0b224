"""The browser tests share one browser context per worker (``support.browser.ReusedContext``):
what one test leaves in it must be gone before the next test's page opens, as in a new profile."""

from __future__ import annotations

import pytest

from support.browser import ReusedContext
from support.web_harness import StartGateway

pytestmark = pytest.mark.browser

PERMISSION = "navigator.permissions.query({name: 'clipboard-read'}).then((p) => p.state)"


async def test_an_emptied_context_keeps_no_storage_cookie_permission_or_page_of_the_last_test(
    start_gateway: StartGateway, reused_context: ReusedContext
) -> None:
    gateway = await start_gateway()
    url = f"http://127.0.0.1:{gateway.port}/"
    context = reused_context.context
    first = await reused_context.open()
    await first.page.goto(url)
    await first.page.evaluate("localStorage.setItem('left', 'x'); sessionStorage.setItem('left', 'y')")
    second_tab = await context.new_page()
    await context.add_cookies([{"name": "left", "value": "1", "url": url}])
    await context.grant_permissions(["clipboard-read"], origin=url.rstrip("/"))
    assert await first.page.evaluate(PERMISSION) == "granted"

    await reused_context.empty()

    assert context.pages == [] and second_tab.is_closed()
    assert await context.cookies() == []
    fresh = await reused_context.open()
    try:
        await fresh.page.goto(url)
        assert await fresh.page.evaluate("localStorage.getItem('left')") is None
        assert await fresh.page.evaluate("sessionStorage.getItem('left')") is None
        assert await fresh.page.evaluate(PERMISSION) != "granted"
    finally:
        await reused_context.empty()
