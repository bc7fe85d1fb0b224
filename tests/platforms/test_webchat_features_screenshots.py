"""Issue 34's screens compared against reference PNGs at desktop and phone size, light and dark:
the model picker in the header, a reply with math (KaTeX, its own fonts) and an aligned table,
regenerated once and switched back to its first answer (``‹ 1/2 ›``). Real Chromium, a real
gateway, a scripted OpenAI-compatible model. Regenerate the references with
``CHATGATE_UPDATE_SCREENSHOTS=1 .venv/bin/pytest tests/platforms/test_webchat_features_screenshots.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.fake_openai_server import API_KEY, Reply, running
from support.browser import SIZES, BrowserSession, browser, open_chat, send
from support.screenshots import check_screenshot
from support.web_harness import StartGateway, web_config

pytestmark = pytest.mark.browser
__all__ = ["browser"]

FIRST = """By Pythagoras, $a^2 + b^2 = c^2$, so

$$
c = \\sqrt{a^2 + b^2} = \\sqrt{3^2 + 4^2} = 5
$$

| side | length |
|:--|--:|
| a | 3 |
| b | 4 |
| c | **5** |"""
SECOND = "In short: $c = 5$."


@pytest.mark.parametrize("size", list(SIZES))
async def test_math_versions_and_the_model_picker_look_like_their_references(
    size: str,
    tmp_path: Path,
    start_gateway: StartGateway,
    browser: BrowserSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from playwright.async_api import expect

    monkeypatch.setenv("FAKE_KEY", API_KEY)
    with running() as model:
        model.script(Reply(FIRST), Reply(SECOND))
        endpoint = {"base_url": model.base_url, "api_key_env": "FAKE_KEY"}
        agent = {"kind": "openai", "openai": {**endpoint, "model": "m-main"}}
        agent["profiles"] = {"fast": {**endpoint, "model": "m-fast"}}
        config = web_config(agent=agent, platforms={"web": {"agent_name": "Ada"}})
        gateway = await start_gateway(config)
        page = browser.page
        await page.set_viewport_size(SIZES[size])
        await open_chat(page, gateway.port)
        await send(page, "How long is the hypotenuse?")
        reply = page.locator(".msg.bot:not(.draft)")
        await expect(reply.locator(".katex-display")).to_have_count(1)
        await reply.hover()
        await reply.get_by_role("button", name="Regenerate").click()
        await expect(reply.locator(".versions .count")).to_have_text("2/2")
        await reply.get_by_role("button", name="Previous answer").click()
        await expect(reply.locator(".katex-display")).to_have_count(1)
        await page.evaluate("import('/static/markdown.js').then((md) => md.settled())")
        await page.evaluate("document.fonts.ready")
        await page.evaluate("document.activeElement.blur()")
        await page.mouse.move(1, 1)
        problems = []
        for theme in ("light", "dark"):
            await page.emulate_media(color_scheme=theme, reduced_motion="reduce")
            png = await page.screenshot(animations="disabled", caret="hide", scale="css")
            problem = check_screenshot(png, f"features-{size}-{theme}", tmp_path)
            if problem:
                problems.append(problem)
        assert not problems, "\n".join(problems)
