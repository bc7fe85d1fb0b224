"""The web chat's gate on lists, searches, pages and exports: one user's reads wait in their own
line, searches run one at a time across users, and a user who piles up requests gets 429
instead of growing a queue (issue 27, finding 7). The real gate on the real event loop."""

from __future__ import annotations

import asyncio

import pytest

from chatgate.platforms.webchat.heavy_reads import HeavyReads, TooManyReads


async def test_one_users_reads_queue_behind_each_other_but_never_in_front_of_another_users() -> None:
    gate = HeavyReads(searches_at_once=1, waiting_per_user=4)
    release = asyncio.Event()
    first_in = asyncio.Event()
    order: list[str] = []

    async def heavy(n: int) -> None:
        async with gate.hold("heavy", search=True):
            order.append(f"heavy{n} in")
            first_in.set()
            await release.wait()

    searches = [asyncio.create_task(heavy(n)) for n in range(5)]
    await first_in.wait()
    for _ in range(10):  # every other search has had its chance to run: none got in
        await asyncio.sleep(0)
    assert order == ["heavy0 in"], "the heavy user's other searches wait in their own line"

    async with gate.hold("light"):  # another user's list is not behind any of them
        order.append("light list")
    assert order == ["heavy0 in", "light list"]

    with pytest.raises(TooManyReads):  # one holding and four in line: the sixth is refused
        async with gate.hold("heavy"):
            pass
    release.set()
    await asyncio.gather(*searches)
    assert sorted(order[2:]) == ["heavy1 in", "heavy2 in", "heavy3 in", "heavy4 in"]
    assert gate._lines == {}, "a user with nothing in flight leaves nothing behind"


async def test_searches_run_one_at_a_time_across_users_so_a_reader_stays_free() -> None:
    gate = HeavyReads(searches_at_once=1)
    inside = 0
    most = 0

    async def search(user: str) -> None:
        nonlocal inside, most
        async with gate.hold(user, search=True):
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.01)
            inside -= 1

    await asyncio.gather(*(search(f"u{n}") for n in range(6)))
    assert most == 1
