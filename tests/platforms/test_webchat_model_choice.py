"""What the ready frame tells the page's model picker (platforms/webchat/model_choice.py), over a
real SQLite store: nothing with one profile; with several, their names (the default first) and
the profile the chat's session chose, by the same session key admission gives its messages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chatgate.domain.profiles import ModelProfile, Profiles
from chatgate.domain.session_key import session_key
from chatgate.domain.source import Source
from chatgate.platforms.webchat.model_choice import ModelChoice
from chatgate.store.sqlite import SqliteStore

TWO = Profiles((ModelProfile("default", model="m-main"), ModelProfile("fast", model="m-fast")))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "chatgate.db")
    await opened.open()
    yield opened
    await opened.close()


def _source(chat_id: str) -> Source:
    return Source("web", chat_id=chat_id, chat_type="dm", user_id="u1", user_name="web user")


async def test_one_profile_gives_the_page_no_picker(store: SqliteStore) -> None:
    choice = ModelChoice(store, Profiles(), session_key)
    assert await choice.ready_fields(_source("web-a")) == {}


async def test_the_fields_name_the_profiles_and_the_sessions_own(store: SqliteStore) -> None:
    choice = ModelChoice(store, TWO, session_key)
    await store.set_session_profile(session_key(_source("web-a")), "fast", 1.0)
    names = ["default", "fast"]
    assert await choice.ready_fields(_source("web-a")) == {"profiles": names, "profile": "fast"}
    assert await choice.ready_fields(_source("web-b")) == {"profiles": names, "profile": "default"}
    await store.set_session_profile(session_key(_source("web-b")), "gone", 2.0)  # removed from the config
    assert (await choice.ready_fields(_source("web-b")))["profile"] == "default"
