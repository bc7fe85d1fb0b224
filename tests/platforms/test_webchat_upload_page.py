"""The page's file picker, drag and drop, and paste, in a real Chromium (support.browser): the
file is uploaded, shown as a chip, sent with the message, and reaches the agent; a slow upload
shows its progress and can be cancelled, a failed one says why and can be retried."""

from __future__ import annotations

from typing import Any

import pytest

from chatgate.domain.media import human_size
from support.axe import axe_violations
from support.browser import SIZES, at_size, browser, browser_page
from support.browser import open_chat as _open_chat
from support.media_files import png
from support.web_harness import StartGateway

pytestmark = pytest.mark.browser
__all__ = ["browser", "browser_page"]


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_a_picked_file_is_uploaded_shown_and_sent_with_the_message(
    start_gateway: StartGateway, browser_page: Any, size: str
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = await _open_chat(await at_size(browser_page, size), gateway.port)
    image = png(40, 30)
    await page.set_input_files(
        "#file", files=[{"name": "chart.png", "mimeType": "image/png", "buffer": image}]
    )
    await expect(page.locator(".file-chip.done")).to_have_count(1)
    await page.fill("#text", "what is this")
    await page.press("#text", "Enter")
    await expect(page.locator(".msg.me")).to_have_text(["what is this\n📎 chart.png"])
    reply = page.locator(".msg.bot:not(.draft)")  # Markdown: each line a line of its own
    await expect(reply).to_contain_text(f"received chart.png (image/png, {human_size(len(image))})")
    await expect(reply).to_contain_text("echo: what is this")
    await expect(page.locator(".file-chip")).to_have_count(0)


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_a_dropped_and_a_pasted_file_are_uploaded(
    start_gateway: StartGateway, browser_page: Any, size: str
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = await _open_chat(await at_size(browser_page, size), gateway.port)
    await page.evaluate(
        """() => {
        const drop = new DataTransfer();
        drop.items.add(new File(["a,b\\n1,2\\n"], "data.csv", { type: "text/csv" }));
        const options = { dataTransfer: drop, bubbles: true, cancelable: true };
        document.body.dispatchEvent(new DragEvent("drop", options));
        const paste = new DataTransfer();
        paste.items.add(new File(["pasted words\\n"], "note.txt", { type: "text/plain" }));
        document.getElementById("text").dispatchEvent(
            new ClipboardEvent("paste", { clipboardData: paste, bubbles: true, cancelable: true }));
    }"""
    )
    await expect(page.locator(".file-chip.done")).to_have_count(2)
    await page.press("#text", "Enter")
    reply = page.locator(".msg.bot:not(.draft)")
    await expect(reply).to_contain_text("echo: received data.csv (text/csv, 8 B)")
    await expect(reply).to_contain_text("received note.txt (text/plain, 13 B)")


async def test_an_upload_shows_progress_can_be_cancelled_and_a_failed_one_retried(
    start_gateway: StartGateway, browser_page: Any
) -> None:
    from playwright.async_api import expect

    gateway = await start_gateway()
    page = await _open_chat(browser_page, gateway.port)
    cdp = await page.context.new_cdp_session(page)
    slow = {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": 256 * 1024}
    await cdp.send("Network.enable")
    await cdp.send("Network.emulateNetworkConditions", slow)  # 2 MiB take about 8 s
    big = {"name": "big.bin", "mimeType": "application/octet-stream", "buffer": bytes(2 * 1024 * 1024)}
    await page.set_input_files("#file", files=[big])
    bar = page.get_by_role("progressbar", name="Uploading big.bin")
    await expect(bar).to_be_visible()
    await page.wait_for_function(  # part of the file sent, not all of it: the bar moves
        "() => { const b = document.querySelector('.file-chip progress');"
        " return b && b.value > 0 && b.value < b.max; }"
    )
    assert await axe_violations(page) == []
    cancel = page.get_by_role("button", name="Cancel uploading big.bin")
    await cancel.focus()
    await page.keyboard.press("Enter")  # by keyboard
    await expect(page.locator(".file-chip")).to_have_count(0)
    await cdp.send("Network.emulateNetworkConditions", {**slow, "uploadThroughput": -1})

    await page.set_viewport_size({"width": 390, "height": 844})  # the failure, at phone size
    refused = {"code": "storage_unavailable", "message": "storage is down"}
    await page.route("**/uploads?*", lambda route: route.fulfill(status=503, json=refused))
    note = {"name": "note.txt", "mimeType": "text/plain", "buffer": b"retry me\n"}
    await page.set_input_files("#file", files=[note])
    await expect(page.locator(".file-chip.failed")).to_contain_text("note.txt — storage is down")
    assert await axe_violations(page) == []
    await page.unroute("**/uploads?*")
    await page.get_by_role("button", name="Retry uploading note.txt").click()
    await expect(page.locator(".file-chip.done")).to_have_count(1)
    await page.fill("#text", "again")
    await page.press("#text", "Enter")
    reply = page.locator(".msg.bot:not(.draft)")
    await expect(reply).to_contain_text("received note.txt (text/plain, 9 B)")
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
