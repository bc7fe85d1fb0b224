"""The session profiles role's contract: a session's ``/model`` choice is its own, the latest
choice wins, choosing again is a no-op, and the choice survives a restart."""

from __future__ import annotations

from chatgate.domain.store_roles import Lifecycle, SessionProfiles
from contract.kit import covers


@covers(SessionProfiles.session_profile, SessionProfiles.set_session_profile)
async def test_a_choice_is_the_sessions_own_and_the_latest_wins(store):
    assert await store.session_profile("k1") is None
    await store.set_session_profile("k1", "fast", 1.0)
    await store.set_session_profile("k1", "fast", 2.0)  # a redelivered /model: the same choice
    assert await store.session_profile("k1") == "fast"
    assert await store.session_profile("k2") is None
    await store.set_session_profile("k1", "big", 3.0)
    await store.set_session_profile("k2", "fast", 3.0)
    assert (await store.session_profile("k1"), await store.session_profile("k2")) == ("big", "fast")


@covers(SessionProfiles.session_profile, Lifecycle.open, Lifecycle.close)
async def test_a_choice_survives_close_and_reopen(open_store):
    store = await open_store()
    await store.set_session_profile("k1", "fast", 1.0)
    await store.close()
    again = await open_store()
    assert await again.session_profile("k1") == "fast"
