"""A store beside a running one (the CLI's, ``app.store_access``): what a command writes there
the running gateway's store reads at once, and the other way round, on every backend; and a
store of one gateway has no fleet, where a shared one lists the gateways on it."""

from __future__ import annotations

from chatgate.domain.api_keys import ApiKeyRecord
from chatgate.domain.store_roles import FleetView
from contract.conftest import Backend
from contract.kit import T0, covers
from contract.test_pairing_contract import LIMITS, ask
from contract.test_schedules_contract import schedule


async def test_a_commands_writes_beside_a_running_store_are_read_by_it_at_once(
    backend: Backend, store
) -> None:
    await store.save_schedule(schedule("s1"))
    asked = await ask(store, "u1")
    assert asked.request is not None
    side = backend.side()
    await side.open()
    try:
        (waiting,) = await side.pending_pairings(T0 + 1)
        assert waiting.code == asked.request.code, "the side store reads what the gateway committed"
        approval = await side.approve_pairing(waiting.code, T0 + 2, LIMITS)
        assert approval.outcome == "approved"
        await side.create_api_key(ApiKeyRecord("k" * 12, "ops", T0), "hash-1")
        assert await side.pause_schedule("s1", True)
    finally:
        await side.close()
    assert [u.user_id for u in await store.paired_users("telegram")] == ["u1"]
    key = await store.api_key_by_hash("hash-1")
    assert key is not None and key.name == "ops"
    found = await store.get_schedule("s1")
    assert found is not None and found.paused


@covers(FleetView.fleet_members)
async def test_a_store_of_one_gateway_has_no_fleet_and_a_shared_one_lists_the_running_gateway(
    backend: Backend, store
) -> None:
    side = backend.side()
    await side.open()
    try:
        members = await side.fleet_members()
    finally:
        await side.close()
    if members is None:  # one gateway per store (SQLite): no fleet, seen from either side
        assert await store.fleet_members() is None
        return
    (gateway,) = members  # the side store does not list itself
    assert gateway["alive"] is True
