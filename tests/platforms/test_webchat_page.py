"""What a person does on the web chat page, in a real Chromium against a real gateway.

Markdown from the model, the composer's keys, Stop and New, the typing indicator, failed turns,
approval cards that stay, the token screen, assets only from the gateway, and themes.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from support.browser import SIZES, BrowserSession, at_size, browser, open_chat, send
from support.web_harness import StartGateway, web_config

pytestmark = pytest.mark.browser
__all__ = ["browser"]

MARKDOWN = (
    "intro with **bold**, *italic* and `inline code`\n"
    "- first\n- second\n"
    "```python\nprint('hi')\n```\n"
    '<script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2">\n'
    "[bad](javascript:window.__pwned=3) [good](https://example.com/docs)"
)


async def test_model_markdown_is_rendered_with_a_copyable_code_block_and_no_script(
    tmp_path: Path, start_gateway: StartGateway, browser: BrowserSession
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = await open_chat(browser.page, gateway.port)
    await browser.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await send(page, MARKDOWN)
    reply = page.locator(".msg.bot:not(.draft)")
    await expect(reply).to_have_count(1)
    await expect(reply.locator("strong")).to_have_text("bold")
    await expect(reply.locator("em")).to_have_text("italic")
    await expect(reply.locator("p code")).to_have_text("inline code")
    await expect(reply.locator("li")).to_have_text(["first", "second"])
    await expect(reply.locator(".codeblock code")).to_have_text("print('hi')")
    await expect(reply.locator("a")).to_have_count(1)
    await expect(reply.locator("a")).to_have_attribute("href", "https://example.com/docs")
    await expect(reply.locator("a")).to_have_attribute("rel", "noopener noreferrer")
    await expect(reply).to_contain_text("<script>window.__pwned = 1</script>")
    await expect(reply).to_contain_text("[bad](javascript:window.__pwned=3)")
    assert await page.locator("#log script, #log img").count() == 0
    assert await page.evaluate("window.__pwned ?? null") is None
    # The user's own text is shown as typed, not rendered.
    await expect(page.locator(".msg.me")).to_contain_text("**bold**")

    await reply.locator("button.copy").click()
    await expect(reply.locator("button.copy")).to_have_text("Copied")
    assert await page.evaluate("navigator.clipboard.readText()") == "print('hi')"
    await page.screenshot(path=str(tmp_path / "markdown.png"))


async def test_shift_enter_breaks_the_line_and_enter_sends(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = await open_chat(browser.page, gateway.port)
    composer = page.locator("#text")
    await composer.click()
    await page.keyboard.type("line one")
    await page.keyboard.press("Shift+Enter")
    await page.keyboard.type("line two")
    assert await composer.input_value() == "line one\nline two"
    await expect(page.locator(".msg.me")).to_have_count(0)  # Shift+Enter did not send
    await page.keyboard.press("Enter")
    await expect(page.locator(".msg.me")).to_have_text(["line one\nline two"])
    assert await composer.input_value() == ""
    reply = page.locator(".msg.bot:not(.draft)")
    await expect(reply).to_have_count(1)
    assert await reply.inner_text() == "echo: line one\nline two"
    await expect(reply.locator("br")).to_have_count(1)


async def test_stop_button_marks_the_streaming_reply_stopped(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway(web_config(agent={"echo": {"chunk_delay_ms": 150}}))
    page = await open_chat(browser.page, gateway.port)
    text = "a reply long enough to be stopped while it streams " * 8  # about 9 s of chunks
    await send(page, text)
    await page.wait_for_selector(".msg.bot.draft")
    draft = page.locator(".msg.draft")
    await expect(draft).to_have_attribute("role", "status")
    await expect(draft).to_have_attribute("aria-busy", "true")
    await page.click("#stop")
    stopped = page.locator(".msg.stopped")
    await expect(stopped).to_have_count(1)
    await expect(stopped.locator(".mark")).to_have_text("stopped")
    assert f"echo: {text}".startswith((await stopped.locator(".body").inner_text()).strip())
    await expect(page.locator(".msg.bot:not(.stopped), .msg.notice")).to_have_count(0)  # no bubble for Stop
    await expect(page.locator("#stop")).to_be_hidden()  # nothing is being answered any more
    await expect(page.locator(".msg.draft")).to_have_count(0)
    await expect(page.locator("#typing")).to_be_hidden()
    await expect(page.locator(".msg.me")).to_have_text([text])  # the /stop itself is not a bubble

    await page.reload()  # the marked reply is part of the history
    await expect(page.locator("#status")).to_have_text("connected")
    await expect(page.locator(".msg.stopped .mark")).to_have_text("stopped")


async def test_new_button_gives_an_empty_conversation_that_stays_empty_after_reload(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = await open_chat(browser.page, gateway.port)
    await send(page, "before new")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(["echo: before new"])
    await page.click("#new")  # another conversation; the old one stays in the list
    await expect(page.locator(".msg.me, .msg.bot, .msg.notice")).to_have_count(0)
    await expect(page.locator("#conversations a")).to_have_text(["before new"])
    await page.reload()
    await expect(page.locator("#status")).to_have_text("connected")
    await expect(page.locator(".msg.me, .msg.bot")).to_have_count(0)
    await send(page, "after new")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(["echo: after new"])
    await expect(page.locator(".msg.me")).to_have_text(["after new"])


async def test_typing_indicator_shows_from_send_until_the_first_draft(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway(web_config(agent={"echo": {"chunk_delay_ms": 300}}))
    page = await open_chat(browser.page, gateway.port)
    assert await page.evaluate("window.__typingSeen") is False
    await send(page, "think about it")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(["echo: think about it"])
    assert await page.evaluate("window.__typingSeen") is True
    await expect(page.locator("#typing")).to_be_hidden()
    await expect(page.locator("#typing")).to_have_attribute("role", "status")


async def test_a_failed_turn_is_shown_as_an_error_alert(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    from playwright.async_api import expect

    # Each 6-char chunk takes 2 s and the turn may take 0.5 s: the gateway apologizes.
    config = web_config(agent={"echo": {"chunk_delay_ms": 2000}, "turn_timeout_seconds": 0.5})
    gateway = await start_gateway(config)
    page = await open_chat(browser.page, gateway.port)
    await send(page, "too slow")
    failure = page.locator(".msg.failure")
    await expect(failure).to_contain_text("did not finish")
    await expect(failure).to_have_attribute("role", "alert")
    await expect(failure.locator(".mark")).to_have_text("error")
    await expect(page.locator("#typing")).to_be_hidden()


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_approval_card_has_large_buttons_and_keeps_its_outcome_after_reload(
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
    await send(page, "!sh rm -rf ./x")
    card = page.locator(".msg.prompt")
    approve = card.locator("button", has_text="Approve once")
    await expect(approve).to_be_visible()
    box = await approve.bounding_box()
    assert box is not None and box["height"] >= 40, box
    await approve.click()
    await expect(card.locator(".outcome")).to_contain_text("Approved")
    await expect(card).to_have_class(re.compile(r"\bapproved\b"))
    await expect(page.locator(".msg.bot:not(.draft)").last).to_contain_text("exit code 0")

    await page.reload()
    await expect(page.locator("#status")).to_have_text("connected")
    await expect(card).to_have_count(1)
    await expect(card).to_contain_text("rm -rf ./x")
    await expect(card.locator(".outcome")).to_contain_text("Approved")
    await expect(card.locator("button")).to_have_count(0)
    await page.screenshot(path=str(tmp_path / "approval-after-reload.png"))


async def test_token_screen_asks_for_the_access_token_and_keeps_it_for_the_tab(
    start_gateway: StartGateway, browser: BrowserSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.async_api import expect

    monkeypatch.setenv("WEBCHAT_TEST_TOKEN", "s3cret-token")
    gateway = await start_gateway(web_config(platforms={"web": {"access_token_env": "WEBCHAT_TEST_TOKEN"}}))
    page = browser.page
    await page.goto(f"http://127.0.0.1:{gateway.port}/")
    screen = page.locator("#token-screen")
    await expect(screen).to_be_visible()
    await expect(page.locator("#status")).to_have_text("access token needed")

    await page.fill("#token", "wrong")
    await page.press("#token", "Enter")
    await expect(page.locator("#token-error")).to_contain_text("not accepted")
    await expect(screen).to_be_visible()

    await page.fill("#token", "s3cret-token")
    await page.press("#token", "Enter")
    await expect(page.locator("#status")).to_have_text("connected")
    await expect(screen).to_be_hidden()
    await send(page, "with a token")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(["echo: with a token"])
    await expect(page.locator(".msg.error")).to_have_count(0)
    await expect(page.locator("#conversations a")).to_have_text(
        ["with a token"]
    )  # the list, behind the token

    await page.reload()  # sessionStorage: the same tab reconnects without asking again
    await expect(page.locator("#status")).to_have_text("connected")
    await expect(screen).to_be_hidden()
    await expect(page.locator("#conversations a")).to_have_text(["with a token"])
    assert "s3cret-token" not in await page.evaluate("JSON.stringify(localStorage)")


async def test_page_loads_only_gateway_assets_with_a_favicon_and_a_strict_policy(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = await open_chat(browser.page, gateway.port)
    await send(page, "hi")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(["echo: hi"])
    assert browser.foreign == []
    assert browser.failed == []
    base = f"http://127.0.0.1:{gateway.port}"
    async with httpx.AsyncClient(base_url=base, follow_redirects=True) as http:
        index = await http.get("/")
        icon = await http.get("/favicon.ico")
        script = await http.get("/static/app.js")
        missing = await http.get("/static/nope.js")
    assert "script-src 'self'" in index.headers["content-security-policy"]
    assert "connect-src 'self'" in index.headers["content-security-policy"]
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert script.headers["content-type"].startswith("text/javascript")
    assert missing.status_code == 404


async def test_dark_and_light_themes_follow_the_system_preference(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    gateway = await start_gateway()
    page = await open_chat(browser.page, gateway.port)
    background = "getComputedStyle(document.body).backgroundColor"
    await page.emulate_media(color_scheme="light")
    light = await page.evaluate(background)
    await page.emulate_media(color_scheme="dark")
    dark = await page.evaluate(background)
    assert light == "rgb(255, 255, 255)"
    assert dark != light
    assert await page.evaluate("getComputedStyle(document.body).colorScheme") == "light dark"


async def test_the_offline_guard_catches_a_request_to_another_host(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    from playwright.async_api import Error as PlaywrightError

    gateway = await start_gateway()
    page = await open_chat(browser.page, gateway.port)
    # From the chat page the policy (connect-src 'self') refuses it before it leaves the browser.
    blocked = await page.evaluate("fetch('https://cdn.example.com/a.js').then(() => false, () => true)")
    assert blocked is True
    assert browser.foreign == []
    # A page without that policy does send it, and the guard catches and aborts it.
    other = await browser.context.new_page()
    with pytest.raises(PlaywrightError):
        await other.goto("https://cdn.example.com/lib.js")
    assert browser.foreign == ["https://cdn.example.com/lib.js"]
    browser.foreign.clear()  # seen and proven: the fixture's own check must not fail this test


async def test_a_typed_slash_new_clears_the_screen_like_the_button(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = await open_chat(browser.page, gateway.port)
    await send(page, "old topic")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(["echo: old topic"])
    await send(page, "/new")
    await expect(page.locator(".msg.me, .msg.bot, .msg.notice")).to_have_count(0)
    await expect(page.locator("#conversations a")).to_have_text(["old topic"])


async def test_what_was_typed_survives_a_reload_and_a_gateway_restart(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = await open_chat(browser.page, gateway.port)
    await page.locator("#text").press_sequentially("half a thought")
    await page.reload()
    await expect(page.locator("#status")).to_have_text("connected")
    assert await page.locator("#text").input_value() == "half a thought"
    await gateway.stop()  # the socket closes; the page retries and keeps the composer as it was
    await expect(page.locator("#status")).to_have_text("disconnected, retrying…")
    assert await page.locator("#text").input_value() == "half a thought"


async def test_phone_width_has_no_sideways_scroll_even_with_a_wide_code_block(
    tmp_path: Path, start_gateway: StartGateway, browser: BrowserSession
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = browser.page
    await page.set_viewport_size({"width": 390, "height": 844})
    await open_chat(page, gateway.port)
    await send(page, "wide:\n```\n" + "x = " + "1234567890" * 20 + "\n```\n| a | b |\n|---|---|\n| 1 | 2 |")
    await expect(page.locator(".msg.bot:not(.draft) .codeblock")).to_have_count(1)
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    for selector in ("#text", "#send", "#new"):  # Stop shows only while a reply is written
        await expect(page.locator(selector)).to_be_in_viewport()
    await page.screenshot(path=str(tmp_path / "phone.png"))
