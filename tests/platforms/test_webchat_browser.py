"""The web chat page in a real Chromium (Debian's /usr/bin/chromium) driven by Playwright.

No browser is downloaded: Playwright's bundled node driver launches the system Chromium.
Without /usr/bin/chromium the tests skip locally but fail in CI (CI=true), which must run them.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from support.web_harness import InboxInsertSwitch, StartGateway, web_config

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_PRESENT = CHROMIUM.exists()
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

# Records every text a draft bubble showed, so a draft is observed even if it lives briefly.
RECORD_DRAFTS = """
window.__drafts = [];
new MutationObserver(() => {
  for (const el of document.querySelectorAll('.msg.draft')) {
    if (el.textContent && window.__drafts[window.__drafts.length - 1] !== el.textContent)
      window.__drafts.push(el.textContent);
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


@pytest.fixture
async def browser_page(tmp_path: Path) -> AsyncIterator[Any]:
    if not CHROMIUM_PRESENT:
        reason = f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser tests, but {reason}")
        pytest.skip(reason)
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=TIMEOUT_MS)
    async with async_playwright() as pw:
        context = await pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
        )
        context.set_default_timeout(TIMEOUT_MS)
        page = context.pages[0] if context.pages else await context.new_page()
        await page.add_init_script(RECORD_DRAFTS)
        try:
            yield page
        finally:
            await context.close()


async def _open_chat(page: Any, port: int | None) -> Any:
    """The gateway's page, once its socket is connected."""
    from playwright.async_api import expect

    await page.goto(f"http://127.0.0.1:{port}/")
    await expect(page.locator("#status")).to_have_text("connected")
    return page


async def _send(page: Any, text: str) -> None:
    await page.fill("#text", text)
    await page.press("#text", "Enter")


async def _bot_texts(page: Any) -> list[str]:
    texts: list[str] = await page.locator(".msg.bot:not(.draft)").all_text_contents()
    return texts


async def test_page_streams_a_draft_then_shows_the_final_and_keeps_history_after_reload(
    tmp_path: Path, start_gateway: StartGateway, browser_page: Any
) -> None:
    from playwright.async_api import expect

    # 150 ms per 6-char chunk: the reply streams for about a second, long enough to see drafts.
    gateway = await start_gateway(web_config(agent={"echo": {"chunk_delay_ms": 150}}))
    page = await _open_chat(browser_page, gateway.port)

    text = "hello from a real browser"
    final = f"echo: {text}"
    await _send(page, text)
    await expect(page.locator(".msg.me")).to_have_text([text])
    await page.wait_for_selector(".msg.bot.draft")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text([final])
    await page.screenshot(path=str(tmp_path / "after-final.png"))

    drafts: list[str] = await page.evaluate("window.__drafts")
    assert drafts, "no draft was shown"
    assert all(final.startswith(d) for d in drafts), drafts
    assert any(len(d) < len(final) for d in drafts), f"no partial draft was shown: {drafts}"
    await expect(page.locator(".msg.draft")).to_have_count(0)
    await expect(page.locator(".msg.me.pending")).to_have_count(0)
    await expect(page.locator(".msg.error")).to_have_count(0)

    await page.reload()
    await expect(page.locator("#status")).to_have_text("connected")
    await expect(page.locator(".msg.me")).to_have_text([text])
    await expect(page.locator(".msg.bot")).to_have_text([final])

    # A second exchange after the reload: the history grows, nothing is shown twice.
    await _send(page, "second")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text([final, "echo: second"])
    await page.reload()
    await expect(page.locator("#status")).to_have_text("connected")
    await expect(page.locator(".msg.me")).to_have_text([text, "second"])
    await expect(page.locator(".msg.bot")).to_have_text([final, "echo: second"])
    await page.screenshot(path=str(tmp_path / "after-reload.png"))


async def test_page_removes_the_draft_of_a_reply_stopped_with_slash_stop(
    tmp_path: Path, start_gateway: StartGateway, browser_page: Any
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway(web_config(agent={"echo": {"chunk_delay_ms": 150}}))
    page = await _open_chat(browser_page, gateway.port)

    # About 45 chunks of 150 ms: still streaming when /stop arrives, even on a stalled machine.
    await _send(page, "a long reply that will be stopped before it is finished streaming " * 4)
    await page.wait_for_selector(".msg.bot.draft")
    await _send(page, "/stop")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text([re.compile(r"^Stopped\.")])
    await _send(page, "after stop")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(
        [re.compile(r"^Stopped\."), "echo: after stop"]
    )
    await page.screenshot(path=str(tmp_path / "after-stop.png"))
    await expect(page.locator(".msg.draft")).to_have_count(0)


async def test_page_marks_a_rejected_message_failed_and_does_not_resend_it_after_reload(
    tmp_path: Path, start_gateway: StartGateway, browser_page: Any
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway(web_config(platforms={"web": {"max_text_chars": 20}}))
    page = await _open_chat(browser_page, gateway.port)

    await _send(page, "this message is far longer than twenty characters")
    await expect(page.locator(".msg.error")).to_have_count(1)
    await expect(page.locator(".msg.error")).to_contain_text("too_large")
    await expect(page.locator(".msg.me.failed")).to_have_count(1)
    await expect(page.locator(".msg.me.pending")).to_have_count(0)

    await page.reload()
    await expect(page.locator("#status")).to_have_text("connected")
    await expect(page.locator(".msg.me.failed")).to_have_count(1)
    # Anything the page resent on "ready" is answered before this message's final.
    await _send(page, "short one")
    await expect(page.locator(".msg.bot")).to_have_text(["echo: short one"])
    await expect(page.locator(".msg.error")).to_have_count(0)
    await page.screenshot(path=str(tmp_path / "after-rejected.png"))


async def test_page_retries_a_message_the_store_could_not_save(
    tmp_path: Path, start_gateway: StartGateway, browser_page: Any
) -> None:
    from playwright.async_api import expect

    from chatgate.store.sqlite import SqliteStore

    switch = InboxInsertSwitch()
    store = SqliteStore(tmp_path / "chatgate.db", connect=switch.connect)
    gateway = await start_gateway(store=store)
    page = await _open_chat(browser_page, gateway.port)

    switch.block()
    await _send(page, "saved on the second try")
    await expect(page.locator(".msg.error").first).to_contain_text("storage_unavailable")
    await expect(page.locator(".msg.me.pending")).to_have_count(1)
    switch.unblock()
    # Without a reconnect, the page retries by itself and the reply arrives once.
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(["echo: saved on the second try"])
    await expect(page.locator(".msg.me.pending")).to_have_count(0)
    await _send(page, "next")
    await expect(page.locator(".msg.bot:not(.draft)")).to_have_text(
        ["echo: saved on the second try", "echo: next"]
    )
    await page.screenshot(path=str(tmp_path / "after-retry.png"))


async def test_page_shows_an_approval_prompt_as_buttons_and_a_click_runs_the_command(
    tmp_path: Path, start_gateway: StartGateway, browser_page: Any
) -> None:
    from playwright.async_api import expect

    workdir = tmp_path / "work"
    (workdir / "x").mkdir(parents=True)
    config = web_config(
        agent={"echo": {"chunk_delay_ms": 0}}, tools={"enabled": True, "workdir": str(workdir)}
    )
    gateway = await start_gateway(config)
    page = await _open_chat(browser_page, gateway.port)
    await _send(page, "!sh rm -rf ./x")
    prompt = page.locator(".msg.prompt")
    await expect(prompt).to_contain_text("rm -rf ./x")
    await expect(prompt.locator("button", has_text="Deny")).to_be_visible()
    assert (workdir / "x").exists()  # shown, not run
    await prompt.locator("button", has_text="Approve once").click()
    await expect(prompt.locator(".outcome")).to_contain_text("Approved")
    await expect(prompt.locator("button")).to_have_count(0)  # the recorded outcome replaces the buttons
    await expect(page.locator(".msg.bot:not(.draft)").last).to_contain_text("exit code 0")
    assert not (workdir / "x").exists()
