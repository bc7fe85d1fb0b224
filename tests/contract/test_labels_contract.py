"""The labels role's contract: the latest observed chat name and topic win, per platform,
scope and chat, and survive a restart."""

from __future__ import annotations

from typing import Any

from chatgate.domain.context import ChatLabels
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.store_roles import (
    Labels,
    Lifecycle,
)
from contract.kit import covers, req


def labelled(
    delivery_id: str, key: str, name: str | None, topic: str | None = None, **kw: Any
) -> AdmitRequest:
    kw.setdefault("chat_id", "g1")
    return req(delivery_id, key, chat_type="group", chat_name=name, chat_topic=topic, **kw)


@covers(Labels.chat_labels)
async def test_latest_label_observation_wins_whatever_order_sessions_were_created(store):
    await store.admit(labelled("d1", "k-ann", "Old", "t1", user_id="ann"))
    await store.admit(labelled("d2", "k-bob", "New", "t2", user_id="bob"))  # a session created later
    assert await store.chat_labels("webchat", None, "g1") == ChatLabels("New", "t2")
    await store.admit(labelled("d3", "k-ann", "Newest", "t3", user_id="ann"))  # back in the older session
    assert await store.chat_labels("webchat", None, "g1") == ChatLabels("Newest", "t3")
    await store.admit(
        req(
            "new-1",
            "k-bob",
            "/new",
            queued=False,
            reset_session=True,
            chat_id="g1",
            chat_type="group",
            user_id="bob",
        )
    )
    assert await store.chat_labels("webchat", None, "g1") == ChatLabels("Newest", "t3")
    await store.admit(labelled("d4", "k-cat", "Renamed", None, user_id="cat"))
    assert await store.chat_labels("webchat", None, "g1") == ChatLabels("Renamed", None)


@covers(Labels.chat_labels)
async def test_admission_without_labels_keeps_the_last_observed_labels(store):
    await store.admit(labelled("d1", "k1", "Team", "Plans"))
    await store.admit(labelled("d2", "k1", None, None))
    await store.admit(labelled("d3", "k2", None, None, user_id="u2"))
    assert await store.chat_labels("webchat", None, "g1") == ChatLabels("Team", "Plans")


@covers(Labels.chat_labels)
async def test_redelivered_old_event_does_not_roll_labels_back(store):
    await store.admit(labelled("d1", "k1", "Old"))
    await store.admit(labelled("d2", "k1", "New"))
    await store.admit(labelled("d1", "k1", "Old"))
    assert await store.chat_labels("webchat", None, "g1") == ChatLabels("New", None)


@covers(Labels.chat_labels, Lifecycle.open, Lifecycle.close)
async def test_labels_survive_close_and_reopen(open_store):
    store = await open_store()
    await store.admit(labelled("d1", "k1", "Team", "Plans"))
    await store.close()
    again = await open_store()
    assert await again.chat_labels("webchat", None, "g1") == ChatLabels("Team", "Plans")


@covers(Labels.chat_labels)
async def test_labels_are_kept_apart_by_platform_scope_and_chat(store):
    await store.admit(labelled("d1", "k1", "Plain"))
    await store.admit(labelled("d2", "k2", "Scoped", scope_id="guild-1"))
    await store.admit(labelled("d3", "k3", "Telegram", platform="telegram", transport="tg"))
    assert await store.chat_labels("webchat", None, "g1") == ChatLabels("Plain", None)
    assert await store.chat_labels("webchat", "guild-1", "g1") == ChatLabels("Scoped", None)
    assert await store.chat_labels("telegram", None, "g1") == ChatLabels("Telegram", None)
    assert await store.chat_labels("webchat", None, "g2") == ChatLabels()
