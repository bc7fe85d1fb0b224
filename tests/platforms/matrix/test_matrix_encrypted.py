"""An end-to-end encrypted room is refused, visibly: the gateway cannot read it (no E2EE yet,
docs/platforms/matrix.md), so it says so once in the room, records each encrypted event it
could not read in the rejected log, logs why, and answers nothing there; unencrypted rooms
go on being answered."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from matrix.client import shown_by
from matrix.conftest import Gateways
from matrix.harness import People, echo_of, joined, matrix_config, wait_for

pytestmark = pytest.mark.slow


async def test_an_encrypted_room_gets_one_notice_and_its_events_are_recorded_as_refused(
    people: People, gateways: Gateways, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chatgate")
    bot, ann = people.account("bot"), people.person("ann")
    gateway = await gateways.start(matrix_config(people.server, bot, tmp_path), bot)
    secret = await ann.create_room(invite=[bot.user_id], direct=True, encrypted=True)
    await joined(ann, secret, bot.user_id)
    # What an E2EE client sends: ciphertext the gateway cannot read (no keys were shared with it).
    fake_cipher = {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEn...", "sender_key": "k",
                   "device_id": "D", "session_id": "s"}  # fmt: skip
    for _ in range(2):
        await ann.send(secret, fake_cipher, "m.room.encrypted")

    async def notices() -> list:
        return [s for s in shown_by(await ann.events(secret), bot.user_id) if "encrypted" in s.text]

    [notice] = await wait_for(notices, 30, "the notice in the encrypted room")
    assert notice.content["msgtype"] == "m.notice"

    def refused() -> int:
        db = sqlite3.connect(gateway.state_dir / "chatgate.db")
        try:
            rows = db.execute("SELECT reason FROM rejected_inbound WHERE transport = 'matrix'").fetchall()
        finally:
            db.close()
        return sum(1 for (reason,) in rows if "encrypted" in reason)

    await wait_for(lambda: refused() == 2, 30, "both encrypted events recorded as refused")
    assert any("end-to-end encrypted" in r.getMessage() for r in caplog.records)

    plain = await ann.create_room(invite=[bot.user_id], direct=True)
    await joined(ann, plain, bot.user_id)
    asked = await ann.say(plain, "still here?")

    async def answered() -> bool:
        return any(s.reply_to == asked and s.text == echo_of("still here?")
                   for s in shown_by(await ann.events(plain), bot.user_id))  # fmt: skip

    await wait_for(answered, 30, "the answer in the unencrypted room")
    assert len(await notices()) == 1, "one notice per room, not one per event"
