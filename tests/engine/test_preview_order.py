"""A turn's previews never land above the previous turn's final (issue 12's ordering promise).

A preview goes to the platform at once, while a final waits in the outbox for its chat's
turn (a rate slot, a slow send). Without a hold, the preview of reply n+1 could be shown
before the final of reply n: the chat would read out of order.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from chatgate.domain.outbox import OutboxRow

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from support.engine_harness import MakeHarness

    Wait = Callable[..., Awaitable[Any]]


async def test_no_preview_is_shown_while_the_previous_reply_is_still_on_its_way(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()
    release = asyncio.Event()

    async def first_final_is_slow(row: OutboxRow) -> None:
        if row.text == "echo: one":
            await release.wait()

    h.adapter.script = first_final_is_slow
    await h.send("one")
    await wait(lambda: h.adapter.calls_for("echo: one"), message="the first final is being sent")
    await h.send("second message, long enough to stream several previews")
    await wait(
        lambda: [
            t
            for t in h.agent.turns_with("second message, long enough to stream several previews")
            if t.state == "done"
        ]
    )
    await asyncio.sleep(0.2)  # any preview the finished turn would still show has had its chance
    assert not [d for d in h.adapter.drafts if "second" in d[-1]], h.adapter.drafts

    release.set()
    await wait(lambda: len(h.adapter.texts()) == 2)
    assert h.adapter.texts() == ["echo: one", "echo: second message, long enough to stream several previews"]


async def test_previews_show_as_usual_when_nothing_is_waiting_ahead(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()
    await h.send("one")
    await wait(lambda: h.adapter.texts() == ["echo: one"])
    await h.send("second message, long enough to stream several previews")
    await wait(lambda: len(h.adapter.texts()) == 2)
    assert [d for d in h.adapter.drafts if "second" in d[-1]], "the second turn streamed previews"
