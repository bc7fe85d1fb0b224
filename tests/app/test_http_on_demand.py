"""A gateway whose platforms bring no HTTP route starts its HTTP server at the first connection.

Such a gateway serves only the probes and ``/metrics``; uvicorn and starlette would cost it
about 3.7 MB for its whole life, asked or not. Its socket listens from the start, the first
connection waits in the backlog while the server starts, and every request is answered.
Real in-process gateways on 127.0.0.1 and raw sockets; ``test_start_imports.py`` shows in a
fresh interpreter that such a gateway, never asked, never imports the HTTP stack.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from chatgate.app import gateway as gateway_module
from chatgate.app.gateway import Gateway
from support.web_harness import _no_chatgate_env, start_gateway, web_config

__all__ = ["_no_chatgate_env", "start_gateway"]  # the fixtures

NO_ROUTES = {"web": {"enabled": False}}


async def _get(port: int, path: str) -> tuple[str, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0].decode(), body


async def test_the_first_requests_wait_for_the_server_and_are_all_answered(
    start_gateway: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    gateway: Gateway = await start_gateway(web_config(platforms=NO_ROUTES))
    assert any("serving from the first request" in r.getMessage() for r in caplog.records)
    assert gateway.port is not None
    # Three at once: the first starts the server, the others wait in the backlog with it.
    answers = await asyncio.gather(*(_get(gateway.port, p) for p in ("/healthz", "/readyz", "/metrics")))
    assert [line for line, _ in answers] == ["HTTP/1.1 200 OK"] * 3, answers
    assert b'"ok"' in answers[0][1] and b"chatgate_" in answers[2][1]
    assert (await _get(gateway.port, "/status"))[0] == "HTTP/1.1 200 OK"
    # The start is announced once, when the gateway started: no line per request.
    assert sum("listening on" in r.getMessage() for r in caplog.records) == 1


async def test_a_gateway_never_asked_stops_and_frees_its_port(start_gateway: Any) -> None:
    gateway: Gateway = await start_gateway(web_config(platforms=NO_ROUTES))
    port = gateway.port
    assert port is not None
    await gateway.stop()
    with pytest.raises(OSError):
        await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)


async def test_a_stop_while_the_server_starts_is_clean(
    start_gateway: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The HTTP stack is already imported in this test process: a slow import (a cold disk)
    # is made to block, so the stop comes while the start is under way.
    importing, release = threading.Event(), threading.Event()

    def slow_import() -> None:
        importing.set()
        release.wait(10)

    monkeypatch.setattr(gateway_module, "import_http_stack", slow_import)
    loop = asyncio.get_running_loop()
    handler = loop.get_exception_handler()
    gateway: Gateway = await start_gateway(web_config(platforms=NO_ROUTES))
    port = gateway.port
    assert port is not None
    _, writer = await asyncio.open_connection("127.0.0.1", port)  # knocks: the start begins
    assert await asyncio.to_thread(importing.wait, 10), "the first connection started no import"
    try:
        await asyncio.wait_for(gateway.stop(), 30)
    finally:
        release.set()
    writer.close()
    with pytest.raises(OSError):
        await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    await asyncio.sleep(0.2)  # a start that outlived the stop would go on now, and log
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert loop.get_exception_handler() is handler
    assert gateway._server is None, "the server was started after the gateway stopped"


async def test_with_the_web_chat_the_server_starts_with_the_gateway(
    start_gateway: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    gateway: Gateway = await start_gateway(web_config())
    assert not any("serving from the first request" in r.getMessage() for r in caplog.records)
    assert any("listening on" in r.getMessage() for r in caplog.records)
    assert gateway.port is not None
    assert (await _get(gateway.port, "/healthz"))[0] == "HTTP/1.1 200 OK"
