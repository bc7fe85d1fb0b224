"""Deadlines and the budget on real sockets, one mechanism at a time (issue 27, findings 5 and 6).

In-process gateways on 127.0.0.1 with short deadlines. A body that arrives a byte a second is
cut off with 408 on every route that reads one (webhooks, the API with a valid key, sign-in);
a WebSocket that sends no accepted hello is closed with 4408 while one that did stays; a
user's socket and another address's slow request are not pushed out by a flood of strangers;
and a client hanging up mid-body is one short line, never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
import websockets

from chatgate.store.sqlite import SqliteStore
from support.accounts_harness import origin, seed
from support.attackers import idle_websocket, source, trickle
from support.procs import wait_until
from support.web_harness import WebClient, _no_chatgate_env, start_gateway, web_config

__all__ = ["_no_chatgate_env", "start_gateway"]  # the fixtures

API_KEY = "api-key-for-deadline-tests"
FAST = {"body_timeout_seconds": 0.5, "min_body_bytes_per_second": 1024, "auth_timeout_seconds": 1.0}


@pytest.fixture(autouse=True)
def _secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_API_KEY", API_KEY)
    monkeypatch.setenv("TEST_HOOK_SECRET", "hook-secret")
    monkeypatch.setenv("TEST_WEB_TOKEN", "web-token")


def _values(**http: Any) -> dict[str, Any]:
    return {
        "http": {"port": 0, **FAST, **http},
        "agent": {"echo": {"chunk_delay_ms": 0}},
        "platforms": {"api": {"enabled": True, "key_storage": "env", "key_env": "TEST_API_KEY"}},
        "hooks": {
            "enabled": True,
            "routes": {
                "ci": {"secret_env": "TEST_HOOK_SECRET", "target": {"platform": "web", "chat_id": "h"}}
            },
        },
    }


def _problems(records: list[logging.LogRecord]) -> list[str]:
    return [
        f"{r.levelname} {r.name}: {r.getMessage()[:200]}" for r in records if r.exc_info or r.levelno >= 40
    ]


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/hooks/ci", {}),
        ("/v1/chat/completions", {"Authorization": f"Bearer {API_KEY}"}),
        ("/api/signin", {"Origin": "ORIGIN"}),
    ],
)
async def test_a_body_a_byte_a_second_is_cut_off_with_408_on_every_route_that_reads_one(
    start_gateway: Any, tmp_path: Path, caplog: Any, path: str, headers: dict[str, str]
) -> None:
    db = tmp_path / "accounts.db"
    await seed(db, ("ann", "admin"))
    values = _values()
    values["platforms"]["web"] = {"auth": "accounts"}
    gateway = await start_gateway(web_config(**values), store=SqliteStore(db))
    sent = {k: origin(gateway.port) if v == "ORIGIN" else v for k, v in headers.items()}
    with caplog.at_level(logging.INFO):
        slow = await trickle(gateway.port, path, headers=sent)
        try:
            answer = await slow.until_answered(30)
        finally:
            await slow.stop()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert slow.sent < 30, "cut off after about half a second, not when the body ended"
    cut = [r.getMessage() for r in caplog.records if "cut off a request body" in r.getMessage()]
    assert len(cut) == 1 and path in cut[0] and len(cut[0]) < 300
    assert _problems(caplog.records) == []


async def test_a_socket_without_an_accepted_hello_is_closed_with_4408_and_a_greeted_one_stays(
    start_gateway: Any,
) -> None:
    values = _values()
    values["platforms"]["web"] = {"access_token_env": "TEST_WEB_TOKEN"}
    gateway = await start_gateway(web_config(**values))
    user = await WebClient.connect(gateway.port)
    await user.hello("kept", token="web-token")
    silent = await WebClient.connect(gateway.port)
    wrong = await WebClient.connect(gateway.port)
    await wrong.send({"type": "hello", "chat_id": "c", "user_id": "u", "token": "not-it"})
    assert (await wrong.recv())["code"] == "unauthorized"
    for idle in (silent, wrong):
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(idle.ws.recv(), 30)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4408
        assert "hello" in closed.value.rcvd.reason
    assert (await user.ask("m1", "still open"))[-1]["text"] == "echo: still open"
    await user.close()


async def test_a_user_s_socket_survives_a_flood_of_strangers_that_push_out_each_other(
    start_gateway: Any,
) -> None:
    values = _values(max_unauthenticated=8, max_unauthenticated_per_address=4, auth_timeout_seconds=60)
    values["platforms"]["web"] = {"access_token_env": "TEST_WEB_TOKEN"}
    gateway = await start_gateway(web_config(**values))
    user = await WebClient.connect(gateway.port)
    await user.hello("vouched", token="web-token")
    flood = [await idle_websocket(gateway.port, source(n % 10)) for n in range(60)]
    try:
        assert all(s.upgraded for s in flood), "each newcomer got a place (pushing out an older one)"
        await asyncio.gather(*(s.closed_by_server(30) for s in flood[:52]))  # all but the newest 8
        assert (await user.ask("m1", "never pushed out"))[-1]["text"] == "echo: never pushed out"
    finally:
        for s in flood:
            s.close()
        await user.close()


async def test_a_flood_from_one_address_pushes_out_only_its_own_not_another_s_slow_request(
    start_gateway: Any,
) -> None:
    gateway = await start_gateway(
        web_config(
            **_values(max_unauthenticated=16, max_unauthenticated_per_address=4, header_timeout_seconds=60)
        )
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the rest of its headers comes later
    await writer.drain()
    flood = [await idle_websocket(gateway.port, "127.0.9.9") for _ in range(30)]
    try:
        # The budget holds 16: the flooder, holding the most, gives up its own oldest each time.
        await asyncio.gather(*(s.closed_by_server(30) for s in flood[:15]))
        writer.write(b"\r\n")
        await writer.drain()
        status = await asyncio.wait_for(reader.readuntil(b"\r\n"), 30)
        assert status.startswith(b"HTTP/1.1 200"), status
    finally:
        writer.close()
        for s in flood:
            s.close()


async def test_clients_hanging_up_mid_body_are_short_lines_within_a_budget_never_a_traceback(
    start_gateway: Any, caplog: Any
) -> None:
    gateway = await start_gateway(web_config(**_values(body_timeout_seconds=60)))
    with caplog.at_level(logging.INFO):
        for _ in range(20):
            _, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
            writer.write(b'POST /hooks/ci HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"half": ')
            await writer.drain()
            writer.close()
            await writer.wait_closed()
        edge = gateway._server.config.app  # the ASGI edge: it logs hang-ups within its budget

        def hang_ups() -> list[str]:
            return [r.getMessage() for r in caplog.records if "before its body was read" in r.getMessage()]

        await wait_until(lambda: len(hang_ups()) + edge.hang_ups.left_out("hang-up") == 20, 30, "20 hang-ups")
    assert len(hang_ups()) == 5 and all(len(line) < 300 for line in hang_ups())
    assert _problems(caplog.records) == []
