"""Math in replies (`$…$`, `$$…$$`) typeset by the vendored KaTeX, loaded only when a message holds
math; the page's Content-Security-Policy holds (KaTeX styles through the CSSOM, its fonts are the
gateway's own), a formula cannot make a link, and the screen passes axe at both sizes. Real
Chromium, a real gateway, the echo agent repeating the math back."""

from __future__ import annotations

import pytest

from support.axe import axe_violations
from support.browser import SIZES, BrowserSession, browser, open_chat, send
from support.web_harness import StartGateway, web_config

pytestmark = pytest.mark.browser
__all__ = ["browser"]

MATH = (
    "Euler: $e^{i\\pi} + 1 = 0$, costs $5 and $10.\n\n"
    "$$\n\\int_0^1 x\\,dx = \\frac{1}{2}\n$$\n\n"
    "hostile: $\\href{javascript:alert(1)}{x}$ and $\\htmlClass{x}{y}$"
)
CSP_WATCH = """window.__csp = [];
document.addEventListener('securitypolicyviolation',
  (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"""


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_math_is_typeset_by_katex_loaded_only_when_needed(
    start_gateway: StartGateway, browser: BrowserSession, size: str
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway(web_config(agent={"echo": {"chunk_delay_ms": 0}}))
    page = browser.page
    await page.add_init_script(CSP_WATCH)
    await page.set_viewport_size(SIZES[size])
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    await open_chat(page, gateway.port)
    await send(page, "no math here, just **bold**")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_count(1)
    assert not [url for url in asked if "katex" in url]  # nothing of KaTeX loaded for a reply without math

    await send(page, MATH)
    reply = page.locator(".msg.bot:not(.draft)").nth(1)
    await expect(reply.locator(".katex")).to_have_count(4)  # two formulas and the two refused commands
    await expect(reply.locator(".katex-display")).to_have_count(1)
    await expect(reply.locator(".katex-mathml math").first).to_be_attached()  # read by screen readers
    await expect(reply).to_contain_text("costs $5 and $10.")
    assert await reply.locator("a").count() == 0  # \href is refused (trust: false)
    assert await reply.locator(".katex .x, .katex [class='x']").count() == 0
    await page.evaluate("document.fonts.ready")
    assert [url for url in asked if "katex" in url and url.endswith(".woff2")]  # its own fonts, served here
    assert await page.evaluate("window.__csp") == []
    assert browser.failed == []
    assert await page.evaluate("document.documentElement.scrollWidth") <= SIZES[size]["width"]
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        assert await axe_violations(page) == [], scheme
