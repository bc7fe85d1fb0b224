"""The ledger of this process's sends (``store/postgres/local_sends.py``): a release of rows with
no send under way runs alone, so it never takes a row a concurrent claim just committed."""

from __future__ import annotations

import asyncio

import pytest

from chatgate.domain.errors import StoreUnavailable
from chatgate.store.postgres.local_sends import LocalSends


async def _attended(sends: LocalSends) -> list[int] | None:
    async with sends.releasing() as attended:
        return attended


async def test_nothing_is_released_until_a_claim_or_settlement_was_in_doubt() -> None:
    sends = LocalSends()
    async with sends.claiming():
        sends.handed_out([1, 2])
    sends.settled([1], recorded=True)
    assert await _attended(sends) is None
    sends.settled([2], recorded=False)
    assert await _attended(sends) == []
    assert await _attended(sends) is None, "the doubt is cleared by a release"


async def test_a_failed_claim_puts_the_ledger_in_doubt() -> None:
    sends = LocalSends()
    with pytest.raises(StoreUnavailable):
        async with sends.claiming():
            raise StoreUnavailable("commit answer lost")
    assert sends.in_doubt


async def test_a_release_waits_for_claims_in_flight_and_holds_new_ones_back() -> None:
    sends = LocalSends()
    sends.in_doubt = True
    in_claim, finish = asyncio.Event(), asyncio.Event()
    order: list[str] = []

    async def claim(ids: list[int], name: str) -> None:
        async with sends.claiming():
            order.append(name)
            in_claim.set()
            await finish.wait()
            sends.handed_out(ids)

    first = asyncio.create_task(claim([7], "first"))
    await in_claim.wait()
    release = asyncio.create_task(_attended(sends))
    await asyncio.sleep(0)  # let the release start waiting
    late = asyncio.create_task(claim([8], "late"))
    await asyncio.sleep(0)
    assert not release.done() and order == ["first"], "the release waits; the late claim waits behind it"
    finish.set()
    assert await release == [7], "the rows of the claim in flight are attended, never released"
    await asyncio.gather(first, late)
    assert order == ["first", "late"]
