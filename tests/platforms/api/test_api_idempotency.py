"""An ``Idempotency-Key`` names one request: its endpoint, its conversation and its whole body.

The same key reused with the same last user message but on another conversation, another
endpoint, or with another body (a different system message, another earlier turn) is a 409 in
OpenAI's error shape naming which of the three changed, runs nothing, and never returns the
first request's answer (issue 27, finding 12). A true retry (the same body, however its JSON
is spaced or its keys ordered, streamed or not) still gets the first answer.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"


def _inbox(world: Any) -> int:
    db = sqlite3.connect(world.gateway.store.path, timeout=30)
    try:
        return int(db.execute("SELECT COUNT(*) FROM inbox WHERE transport = 'api'").fetchone()[0])
    finally:
        db.close()


def _chat(text: str, system: str | None = None, **extra: Any) -> dict[str, Any]:
    messages = [{"role": "system", "content": system}] if system else []
    return {"model": "chatgate", "messages": [*messages, {"role": "user", "content": text}], **extra}


def _streamed_text(sse: str) -> str:
    chunks = [json.loads(line[6:]) for line in sse.splitlines() if line.startswith("data: {")]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def _conflict(response: Any, reason: str) -> None:
    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert error["code"] == "idempotency_key_reused", error
    assert error["type"] == "conflict_error" and error["param"] == "Idempotency-Key", error
    assert reason in error["message"], error["message"]
    assert "echo:" not in response.text  # never the first request's answer


async def test_the_same_key_on_another_conversation_is_a_409_not_the_first_answer(api):
    world = await api()
    key = {"Idempotency-Key": "k-conv"}
    async with world.http() as http:
        first = await http.post(
            CHAT, json=_chat("same text"), headers={**key, "X-Chatgate-Conversation": "a"}
        )
        assert first.status_code == 200 and "echo: same text" in first.text
        other = await http.post(
            CHAT, json=_chat("same text"), headers={**key, "X-Chatgate-Conversation": "b"}
        )
        by_user = await http.post(CHAT, json=_chat("same text", user="c"), headers=key)
    _conflict(other, "another conversation")
    _conflict(by_user, "another conversation")
    assert _inbox(world) == 1


async def test_the_same_key_on_another_endpoint_is_a_409_not_the_first_answer(api):
    world = await api()
    key = {"Idempotency-Key": "k-endpoint"}
    async with world.http() as http:
        first = await http.post(CHAT, json=_chat("same text"), headers=key)
        assert first.status_code == 200
        other = await http.post(RESPONSES, json={"model": "chatgate", "input": "same text"}, headers=key)
    _conflict(other, "another endpoint")
    assert _inbox(world) == 1


async def test_the_same_key_with_another_body_is_a_409_even_when_the_last_message_is_the_same(api):
    world = await api()
    key = {"Idempotency-Key": "k-body"}
    async with world.http() as http:
        first = await http.post(CHAT, json=_chat("same text", system="be terse"), headers=key)
        assert first.status_code == 200
        other_system = await http.post(CHAT, json=_chat("same text", system="be verbose"), headers=key)
        no_system = await http.post(CHAT, json=_chat("same text"), headers=key)
    _conflict(other_system, "another request body")
    _conflict(no_system, "another request body")
    assert _inbox(world) == 1


async def test_a_true_retry_is_answered_once_however_its_json_is_written_or_streamed(api):
    world = await api()
    key = {"Idempotency-Key": "k-retry", "Content-Type": "application/json"}
    body = _chat("retry me", system="be terse")
    async with world.http() as http:
        first = await http.post(CHAT, content=json.dumps(body), headers=key)
        reordered = dict(reversed(list(body.items())))
        spaced = await http.post(CHAT, content=json.dumps(reordered, indent=4), headers=key)
        streamed = await http.post(CHAT, content=json.dumps({**body, "stream": True}), headers=key)
    assert first.status_code == spaced.status_code == streamed.status_code == 200
    assert first.json()["id"] == spaced.json()["id"]
    assert first.json()["choices"][0]["message"]["content"] == "echo: retry me"
    assert _streamed_text(streamed.text) == "echo: retry me"
    assert _inbox(world) == 1
