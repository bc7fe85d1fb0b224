"""A storage failure at admission is loud on the API: 503, nothing runs, and a retry with the
same Idempotency-Key after the outage is answered once.

The seam is the store's sqlite3 connection factory (``InboxInsertSwitch``): real SQLite
connections whose authorizer refuses INSERT INTO inbox while the switch is closed."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import openai
import pytest

from chatgate.domain.api_keys import ApiKeyRecord, hash_token, new_api_key
from chatgate.store.sqlite import SqliteStore
from support.api_harness import TIMEOUT, api_config
from support.web_harness import InboxInsertSwitch, web_config


async def test_an_inbox_write_failure_is_a_503_and_the_retry_is_answered_once(tmp_path: Path, start_gateway):
    switch = InboxInsertSwitch()
    store = SqliteStore(tmp_path / "chatgate.db", connect=switch.connect)
    gateway = await start_gateway(web_config(**api_config()), store=store)
    key_id, token = new_api_key()
    await gateway.store.create_api_key(ApiKeyRecord(key_id, "t", time.time()), hash_token(token))
    ask = {"model": "chatgate", "messages": [{"role": "user", "content": "during the outage"}]}
    headers = {"Idempotency-Key": "outage-1"}
    async with openai.AsyncOpenAI(
        api_key=token, base_url=f"http://127.0.0.1:{gateway.port}/v1", max_retries=0, timeout=TIMEOUT
    ) as client:
        switch.block()
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(**ask, extra_headers=headers)
        assert caught.value.status_code == 503 and caught.value.body["code"] == "storage_unavailable"
        assert switch.denied >= 1, "the failure was not injected by SQLite"
        switch.unblock()
        done = await client.chat.completions.create(**ask, extra_headers=headers)
        again = await client.chat.completions.create(**ask, extra_headers=headers)
    assert done.choices[0].message.content == again.choices[0].message.content == "echo: during the outage"
    db = sqlite3.connect(tmp_path / "chatgate.db", timeout=30)
    try:
        assert db.execute("SELECT COUNT(*) FROM inbox WHERE transport = 'api'").fetchone() == (1,)
    finally:
        db.close()
