"""The web chat page in a real Chromium driven by Playwright (see support.browser): streaming,
history after a reload, failed and retried messages, and approval buttons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.browser import browser, browser_page
from support.browser import open_chat as _open_chat
from support.browser import send as _send
from support.web_harness import InboxInsertSwitch, StartGateway, web_config

pytestmark = pytest.mark.browser
__all__ = ["browser", "browser_page"]


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


async def test_page_marks_a_reply_stopped_with_a_typed_slash_stop(
    tmp_path: Path, start_gateway: StartGateway, browser_page: Any
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway(web_config(agent={"echo": {"chunk_delay_ms": 150}}))
    page = await _open_chat(browser_page, gateway.port)

    # About 90 chunks of 150 ms: still streaming when /stop arrives, even on a stalled machine.
    long_text = "a long reply that will be stopped before it is finished streaming " * 8
    await _send(page, long_text)
    await page.wait_for_selector(".msg.bot.draft")
    await _send(page, "/stop")
    stopped = page.locator(".msg.stopped")
    await expect(stopped).to_have_count(1)
    await expect(stopped.locator(".mark")).to_have_text("stopped")
    partial = await stopped.locator(".body").inner_text()
    assert f"echo: {long_text}".startswith(partial.strip()), partial
    assert len(partial.strip()) < len(f"echo: {long_text}".strip())
    await _send(page, "after stop")
    # Like the Stop button: no "/stop" bubble and no "Stopped. Dropped 0 waiting message(s)." bubble.
    await expect(page.locator(".msg.bot:not(.draft):not(.stopped)")).to_have_text(["echo: after stop"])
    await expect(page.locator(".msg.me")).to_have_text([long_text, "after stop"])
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
