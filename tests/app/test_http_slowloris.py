"""Half-sent requests cannot take the gateway's descriptors: a header deadline and a cap.

Real parts: a gateway subprocess whose RLIMIT_NOFILE is lowered so that exhaustion
is reachable with the sockets a test can open, raw TCP clients that send part of a
request and stop, and the gateway's own ``/readyz`` and ``/ws``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from chatgate.app.config import GatewayConfig
from chatgate.app.descriptors import DESCRIPTOR_RESERVE
from chatgate.app.gateway import Gateway
from chatgate.app.http.guard import AcceptErrorThrottle
from chatgate.app.startup import StartupError
from chatgate.platforms.kit.conform import conform
from support.procs import GatewayProcess
from support.web_harness import WebClient

NOFILE = 512
CAP = 300
SLOW_CLIENTS = 1_100
_LOW_NOFILE = (
    "import resource, runpy;"
    f" resource.setrlimit(resource.RLIMIT_NOFILE, ({NOFILE}, {NOFILE}));"
    " runpy.run_module('chatgate.app.cli', run_name='__main__')"
)


async def _slow_client(port: int) -> socket.socket:
    """Connected, a request line and one header sent, and never the blank line that ends them."""
    sock = socket.socket()
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    await loop.sock_sendall(sock, b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return sock


async def test_readyz_and_the_web_chat_answer_while_1100_slow_clients_hold_connections(
    tmp_path: Path,
) -> None:
    gateway = GatewayProcess(tmp_path, {"http": {"max_connections": CAP}})
    await gateway.start(launcher=[sys.executable, "-c", _LOW_NOFILE])
    assert gateway.proc is not None
    slow: list[socket.socket] = []
    try:
        for _ in range(SLOW_CLIENTS):
            slow.append(await _slow_client(gateway.port))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=30) as http:
            for _ in range(3):
                ready = await http.get("/readyz")
                assert ready.status_code == 200, ready.text
        client = await WebClient.connect(gateway.port)
        await client.hello("chat-under-siege")
        assert (await client.ask("m1", "still here?"))[-1]["text"] == "echo: still here?"
        await client.close()
        assert psutil.Process(gateway.proc.pid).num_fds() <= CAP + DESCRIPTOR_RESERVE
        assert gateway.logs().count("out of system resource") <= 1
    finally:
        for sock in slow:
            sock.close()
        with contextlib.suppress(ProcessLookupError):
            await gateway.kill()


@pytest.fixture
async def quick_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Gateway:
    for name in list(__import__("os").environ):
        if name.startswith("CHATGATE_"):
            monkeypatch.delenv(name)
    config = conform(
        GatewayConfig,
        dict(http={"port": 0, "header_timeout_seconds": 0.3}, agent={"echo": {"chunk_delay_ms": 0}}),
    )
    gateway = Gateway(config, tmp_path)
    await gateway.start()
    return gateway


async def _read_all(sock: socket.socket) -> bytes:
    loop = asyncio.get_running_loop()
    data = b""
    while chunk := await asyncio.wait_for(loop.sock_recv(sock, 4096), 30):
        data += chunk
    return data


async def test_a_request_whose_headers_never_end_is_answered_408_and_closed(quick_deadline: Gateway) -> None:
    assert quick_deadline.port is not None
    try:
        sock = await _slow_client(quick_deadline.port)
        with sock:
            answer = await _read_all(sock)
        assert answer.startswith(b"HTTP/1.1 408"), answer
    finally:
        await quick_deadline.stop()


async def test_a_keep_alive_connection_gets_the_deadline_again_for_its_next_request(
    quick_deadline: Gateway,
) -> None:
    assert quick_deadline.port is not None
    loop = asyncio.get_running_loop()
    try:
        sock = socket.socket()
        sock.setblocking(False)
        with sock:
            await loop.sock_connect(sock, ("127.0.0.1", quick_deadline.port))
            await loop.sock_sendall(sock, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            first = await asyncio.wait_for(loop.sock_recv(sock, 4096), 30)
            assert first.startswith(b"HTTP/1.1 200"), first
            await loop.sock_sendall(sock, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and no more
            answer = await _read_all(sock)
        assert answer.startswith(b"HTTP/1.1 408"), answer
    finally:
        await quick_deadline.stop()


async def test_a_cap_the_process_cannot_hold_is_refused_at_start_naming_the_key(tmp_path: Path) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard >= 1_000_000:
        pytest.skip(f"the hard descriptor limit ({hard}) is above any cap the config accepts")
    config = conform(GatewayConfig, dict(http={"port": 0, "max_connections": hard}))
    with pytest.raises(StartupError, match=r"http\.max_connections.*LimitNOFILE"):
        await Gateway(config, tmp_path).start()


async def test_accept_errors_at_the_descriptor_limit_are_logged_once_a_period(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    throttle = AcceptErrorThrottle(period=3600)
    loop.set_exception_handler(throttle)
    try:
        with caplog.at_level(logging.ERROR, logger="chatgate.app.http.guard"):
            for _ in range(15_000):
                loop.call_exception_handler(
                    {"message": AcceptErrorThrottle.MESSAGE, "exception": OSError(24, "Too many open files")}
                )
    finally:
        loop.set_exception_handler(previous)
    lines = [r for r in caplog.records if r.name == "chatgate.app.http.guard"]
    assert len(lines) == 1 and "out of file descriptors" in lines[0].getMessage()
    assert throttle.suppressed == 14_999
