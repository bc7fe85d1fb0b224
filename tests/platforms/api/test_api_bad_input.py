"""Bad input gets a 400 with an OpenAI-shaped error naming what is wrong, is logged, admits
nothing, and never disturbs the requests around it."""

from __future__ import annotations

import logging
import sqlite3

import pytest

GOOD = {"model": "chatgate", "messages": [{"role": "user", "content": "still fine"}]}

BAD_BODIES = [
    pytest.param(b"{not json", "invalid_json", None, id="malformed-json"),
    pytest.param(b"\xff\xfe{}", "invalid_json", None, id="not-utf8"),
    pytest.param(b"[1, 2]", "invalid_request", None, id="not-an-object"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, "invalid_json", None, id="deeply-nested"),
    pytest.param(b'{"model": "chatgate"}', "invalid_request", "messages", id="no-messages"),
    pytest.param(b'{"model": 7, "messages": []}', "invalid_request", "model", id="model-not-a-string"),
    pytest.param(
        b'{"model": "chatgate", "messages": [{"role": "user", "content": 5}]}',
        "invalid_request",
        "messages.0.content.str",
        id="content-wrong-type",
    ),
    pytest.param(
        b'{"model": "chatgate", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}',
        "invalid_request",
        "stream",
        id="stream-not-a-bool",
    ),
    pytest.param(
        b'{"model": "chatgate", "messages": [{"role": "wizard", "content": "x"}]}',
        "invalid_request",
        "messages.0.role",
        id="unknown-role",
    ),
    pytest.param(
        b'{"model": "chatgate", "messages": [{"role": "assistant", "content": "x"}]}',
        "invalid_request",
        "messages.0.role",
        id="last-not-user",
    ),
    pytest.param(
        b'{"model": "chatgate", "messages": [{"role": "user", "content": "   "}]}',
        "invalid_request",
        "messages.0.content",
        id="empty-text",
    ),
]


def _admitted(world) -> int:
    db = sqlite3.connect(world.gateway.store.path, timeout=30)
    try:
        return int(db.execute("SELECT COUNT(*) FROM inbox WHERE transport = 'api'").fetchone()[0])
    finally:
        db.close()


@pytest.mark.parametrize(("body", "code", "param"), BAD_BODIES)
async def test_bad_input_is_a_structured_400_that_is_logged_and_admits_nothing(
    api, caplog, body, code, param
):
    world = await api()
    caplog.set_level(logging.INFO, logger="chatgate.platforms.api")
    async with world.http() as http:
        bad = await http.post(
            "/v1/chat/completions", content=body, headers={"Content-Type": "application/json"}
        )
        good = await http.post("/v1/chat/completions", json=GOOD)
    assert bad.status_code == 400, bad.text
    error = bad.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == code and error["message"]
    if param is not None:
        assert error["param"] == param
    assert any(r.getMessage().startswith("api request refused") and r.code == code for r in caplog.records)
    assert good.status_code == 200 and good.json()["choices"][0]["message"]["content"] == "echo: still fine"
    assert _admitted(world) == 1


async def test_an_oversized_body_is_refused_without_being_read(api):
    world = await api(api={"max_body_bytes": 4096})
    big = {"model": "chatgate", "messages": [{"role": "user", "content": "x" * 10_000}]}
    async with world.http() as http:
        declared = await http.post("/v1/chat/completions", json=big)

        async def chunks():
            for _ in range(10):
                yield b"x" * 1000

        streamed = await http.post(
            "/v1/responses", content=chunks(), headers={"Content-Type": "application/json"}
        )
        good = await http.post("/v1/chat/completions", json=GOOD)
    for refused in (declared, streamed):
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "body_too_large"
    assert good.status_code == 200
    assert _admitted(world) == 1


async def test_a_text_over_the_admission_limit_is_refused_by_admission_with_its_reason(api):
    world = await api(api={"max_body_bytes": 1024 * 1024})
    async with world.http() as http:
        resp = await http.post("/v1/responses", json={"model": "chatgate", "input": "y" * 40_000})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "too_large"
    rejected = await world.gateway.store.rejected()
    assert [r.transport for r in rejected] == ["api"]  # recorded in the rejected log, never admitted


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="none"),
        pytest.param({"Authorization": "Basic abc"}, id="not-bearer"),
        pytest.param({"Authorization": "Bearer"}, id="empty"),
        pytest.param({"Authorization": "Bearer sk-not-ours"}, id="foreign-shape"),
    ],
)
async def test_a_request_without_a_valid_key_is_401_with_an_openai_error(api, headers):
    world = await api()
    import httpx

    async with httpx.AsyncClient(base_url=world.base, headers=headers, timeout=30) as http:
        for method, path in (
            ("GET", "/v1/models"),
            ("POST", "/v1/chat/completions"),
            ("GET", "/v1/responses/resp_x"),
        ):
            resp = await http.request(method, path, json=GOOD)
            assert resp.status_code == 401
            assert resp.json()["error"]["type"] == "authentication_error"
            assert resp.headers["www-authenticate"] == "Bearer"
    assert _admitted(world) == 0


async def test_bad_conversation_and_idempotency_headers_are_400s(api):
    world = await api()
    async with world.http() as http:
        long = await http.post(
            "/v1/chat/completions", json=GOOD, headers={"X-Chatgate-Conversation": "c" * 300}
        )
        empty = await http.post("/v1/chat/completions", json=GOOD, headers={"Idempotency-Key": ""})
        # Checked even where the body's conversation takes precedence (schemathesis found this).
        named = {"model": "chatgate", "input": "x", "conversation": "notes"}
        unused = await http.post("/v1/responses", json=named, headers={"X-Chatgate-Conversation": ""})
    assert long.status_code == 400 and long.json()["error"]["param"] == "X-Chatgate-Conversation"
    assert unused.status_code == 400 and unused.json()["error"]["param"] == "X-Chatgate-Conversation"
    assert empty.status_code == 400 and empty.json()["error"]["param"] == "Idempotency-Key"
    assert _admitted(world) == 0


async def test_a_body_that_trickles_in_is_refused_when_its_deadline_passes(api, monkeypatch):
    import asyncio
    import json

    from chatgate.platforms.api import bodies

    monkeypatch.setattr(bodies, "BODY_SECONDS", 0.5)
    world = await api()
    reader, writer = await asyncio.open_connection("127.0.0.1", world.gateway.port)
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {world.token}\r\nContent-Length: 1000\r\n\r\n"
    )
    writer.write(head.encode() + b'{"model": ')  # and then nothing more
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(65536), 30)
    writer.close()
    status, _, rest = answer.partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 400")
    assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "body_timeout"
    assert _admitted(world) == 0


async def test_an_unknown_endpoint_is_an_openai_404_and_a_wrong_method_an_openai_405(api):
    world = await api()
    async with world.http() as http:
        unknown = await http.post("/v1/embeddings", json={"model": "chatgate", "input": "x"})
        wrong = await http.delete("/v1/models")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_endpoint"
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"
    assert "GET" in wrong.headers["allow"]
