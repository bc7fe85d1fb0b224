"""The web chat page at desktop and phone size, compared against committed reference PNGs.

A real gateway and a real Chromium hold a fixed conversation: a reply with Markdown (a nested
list, a table, highlighted code), a failed turn shown as an error, a refused message, and an
open approval card. Animations and the caret are off; fonts are the system's (no web fonts).
References live in tests/platforms/screenshots/; regenerate them with
``CHATGATE_UPDATE_SCREENSHOTS=1 .venv/bin/pytest tests/platforms/test_webchat_screenshots.py``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from chatgate.agents.base import AgentEvent, AgentFailed, AgentRequest, Final
from chatgate.agents.echo import EchoAgent
from chatgate.app.gateway import Gateway
from support.browser import SIZES, BrowserSession, browser, open_chat, send
from support.screenshots import UPDATING, check_screenshot
from support.web_harness import STOP_TIMEOUT, web_config

pytestmark = pytest.mark.browser
__all__ = ["browser"]


CHECKLIST = """## Release checklist
Before tagging, run the **full** suite and read the *changelog* (see `docs/`).

1. Prepare
   - bump the version
   - update [the docs](https://example.com/docs)
2. Tag and push

| step | owner | time |
|---|:-:|--:|
| build | CI | 4 min |
| publish | release bot | 1 min |

```python
def release(version: str) -> None:
    \"\"\"Tag and publish.\"\"\"
    if not version:
        raise ValueError("no version")  # refuse
    print(f"releasing {version}", 42)
```"""

SCRIPT = """> Run it from the repository root.

```bash
#!/usr/bin/env bash
set -euo pipefail
for pkg in dist/*.whl; do echo "uploading $pkg"; done
```"""

REPLIES = {"release checklist?": CHECKLIST, "and the script?": SCRIPT}
FAIL = "summarize the logs"


class ScriptedAgent(EchoAgent):
    """Fixed Markdown replies, one failing turn, and the echo agent's ``!sh`` tool calls."""

    async def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]:
        text = request.model_input.strip()
        if text == FAIL:
            yield AgentFailed("the model's service refused the request")
        elif text in REPLIES:
            yield Final(REPLIES[text])
        else:
            async for event in super().stream(request):
                yield event


@pytest.fixture
async def scripted_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Gateway]:
    # The failed turn's notice names a random error id: a fixed one keeps the pixels stable.
    monkeypatch.setattr("chatgate.engine.turn.new_error_id", lambda: "err-0123456789")
    workdir = tmp_path / "work"
    (workdir / "build").mkdir(parents=True)
    config = web_config(
        agent={"echo": {"chunk_delay_ms": 0}},
        tools={"enabled": True, "workdir": str(workdir)},
        platforms={"web": {"max_text_chars": 200}},
    )
    gateway = Gateway(config, tmp_path / "state", agent=ScriptedAgent(chunk_delay_ms=0))
    await gateway.start()
    yield gateway
    await asyncio.wait_for(gateway.stop(), STOP_TIMEOUT)


async def _conversation(page: Any, port: int | None) -> None:
    """The fixed conversation, each step waited for, ending with an open approval card."""
    from playwright.async_api import expect

    await open_chat(page, port)
    finals = page.locator(".msg.bot:not(.draft)")
    for n, question in enumerate(REPLIES, start=1):
        await send(page, question)
        await expect(finals).to_have_count(n)
    await send(page, FAIL)
    await expect(page.locator(".msg.failure")).to_have_count(1)
    await send(page, "x" * 201)  # longer than max_text_chars: refused, shown as an error
    await expect(page.locator(".msg.error")).to_have_count(1)
    await expect(page.locator(".msg.me.failed")).to_have_count(1)
    await send(page, "!sh rm -rf ./build")
    await expect(page.locator(".msg.prompt button", has_text="Deny")).to_be_visible()
    await expect(page.locator(".msg.draft")).to_have_text(re.compile(r"shell: rm -rf ./build"))
    await expect(page.locator("#typing")).to_be_hidden()
    await page.evaluate("import('/static/markdown.js').then((md) => md.settled())")  # code highlighted
    await page.evaluate("document.activeElement.blur()")


Shoot = Callable[[str, str], Awaitable[bytes]]
SCROLL = "(top) => { const log = document.getElementById('log'); log.scrollTop = top ? 0 : log.scrollHeight }"


def _shooter(page: Any) -> Shoot:
    async def shoot(theme: str, where: str) -> bytes:
        await page.emulate_media(color_scheme=theme, reduced_motion="reduce")
        await page.evaluate(SCROLL, where == "top")
        png: bytes = await page.screenshot(animations="disabled", caret="hide", scale="css")
        return png

    return shoot


@pytest.mark.parametrize("size", list(SIZES))
async def test_the_page_looks_like_its_reference_screenshots(
    size: str, tmp_path: Path, scripted_gateway: Gateway, browser: BrowserSession
) -> None:
    page = browser.page
    await page.set_viewport_size(SIZES[size])
    await _conversation(page, scripted_gateway.port)
    shoot = _shooter(page)
    problems = []
    for theme in ("light", "dark"):
        for where in ("top", "bottom"):
            name = f"{size}-{theme}-{where}"
            problem = check_screenshot(await shoot(theme, where), name, tmp_path)
            if problem:
                problems.append(problem)
    assert not problems, "\n".join(problems)


PADDING = ".msg { padding: .6rem .8rem; }"  # was .5rem .8rem: 1.6 px more above and below each text
KEYWORD = ".tok-keyword { color: #116329; }"  # was #cf222e: four words of one code block turn green


@pytest.mark.skipif(UPDATING, reason="regenerating the references")
@pytest.mark.parametrize("rule", [PADDING, KEYWORD], ids=["padding", "keyword-colour"])
async def test_a_changed_css_rule_fails_the_comparison_and_leaves_actual_and_diff_images(
    rule: str, tmp_path: Path, scripted_gateway: Gateway, browser: BrowserSession
) -> None:
    """The tolerance is not so loose that a real change of layout or colour passes."""
    page = browser.page

    async def with_rule(route: Any) -> None:
        response = await route.fetch()
        await route.fulfill(response=response, body=(await response.text()) + "\n" + rule + "\n")

    await page.route("**/static/app.css", with_rule)
    await page.set_viewport_size(SIZES["desktop"])
    await _conversation(page, scripted_gateway.port)
    problem = check_screenshot(await _shooter(page)("light", "top"), "desktop-light-top", tmp_path)
    assert problem is not None, f"{rule} changed the page, yet the comparison passed"
    assert (tmp_path / "desktop-light-top.actual.png").exists()
    assert (tmp_path / "desktop-light-top.diff.png").exists()
    assert str(tmp_path / "desktop-light-top.diff.png") in problem
