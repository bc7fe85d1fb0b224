"""The cursors role's contract: a named upstream position reads back the value last committed."""

from __future__ import annotations

from chatgate.domain.store_roles import (
    Cursors,
)
from contract.kit import covers


@covers(Cursors.get_cursor, Cursors.set_cursor)
async def test_a_cursor_reads_back_its_latest_value_and_an_unknown_name_is_none(store):
    assert await store.get_cursor("telegram:1") is None
    await store.set_cursor("telegram:1", "100")
    await store.set_cursor("telegram:2", "7")
    await store.set_cursor("telegram:1", "101")
    assert await store.get_cursor("telegram:1") == "101"
    assert await store.get_cursor("telegram:2") == "7"
    assert await store.get_cursor("telegram") is None


@covers(Cursors.get_cursor, Cursors.set_cursor)
async def test_an_empty_value_is_stored_and_is_not_absent(store):
    await store.set_cursor("x", "")
    assert await store.get_cursor("x") == ""


@covers(Cursors.set_cursor, Cursors.get_cursor)
async def test_a_cursor_is_committed_when_set_cursor_returns(open_store):
    store = await open_store()
    await store.set_cursor("poll", "42 ünïcode")
    await store.close()
    again = await open_store()
    assert await again.get_cursor("poll") == "42 ünïcode"
