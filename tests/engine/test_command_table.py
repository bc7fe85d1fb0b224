"""The control-command table: every command the platforms advertise has its behaviour."""

from __future__ import annotations

from pathlib import Path

from chatgate.domain.commands import CONTROL_COMMANDS
from chatgate.engine.commands import COMMAND_TABLE
from chatgate.store.sqlite import SqliteStore


def test_every_advertised_command_has_an_entry_carrying_its_handler() -> None:
    assert [spec.name for spec in CONTROL_COMMANDS] == list(COMMAND_TABLE)
    for name, entry in COMMAND_TABLE.items():
        assert entry.spec.name == name and callable(entry.reply)


def test_only_new_and_stop_stop_the_session_and_only_new_resets_it() -> None:
    assert {n for n, e in COMMAND_TABLE.items() if e.stops} == {"new", "stop"}
    assert {n for n, e in COMMAND_TABLE.items() if e.resets} == {"new"}
    assert {n for n, e in COMMAND_TABLE.items() if e.answers_approval} == {"approve", "deny"}


async def test_status_reads_the_session_from_the_store(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "chatgate.db")
    await store.open()
    try:
        text = await COMMAND_TABLE["status"].reply("agent:main:web:dm:c1", store)
    finally:
        await store.close()
    assert text == "Session agent:main:web:dm:c1: no messages yet."
    help_reply = await COMMAND_TABLE["help"].reply("k", store)
    assert all(f"/{spec.name}" in help_reply for spec in CONTROL_COMMANDS)
