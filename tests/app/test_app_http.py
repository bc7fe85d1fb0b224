"""HTTP surfaces of an in-process gateway: readiness follows the store, status stays local."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from chatgate.app.config import GatewayConfig
from chatgate.app.gateway import Gateway
from chatgate.platforms.kit.conform import conform
from chatgate.store.sqlite.health import WRITE_EVERY


@pytest.fixture
async def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Gateway]:
    for name in list(__import__("os").environ):
        if name.startswith("CHATGATE_"):
            monkeypatch.delenv(name)
    config = conform(GatewayConfig, dict(http={"port": 0}, agent={"echo": {"chunk_delay_ms": 0}}))
    gw = Gateway(config, tmp_path)
    await gw.start()
    yield gw
    await gw.stop()


async def _readyz_until(http: httpx.AsyncClient, status: int, tries: int = 50) -> httpx.Response:
    """Ask /readyz until it answers ``status``: a probe's answer is reused for WRITE_EVERY seconds."""
    for _ in range(tries):
        response = await http.get("/readyz")
        if response.status_code == status:
            return response
        await asyncio.sleep(WRITE_EVERY / 4)
    raise AssertionError(f"/readyz never answered {status}; last: {response.status_code} {response.text}")


async def test_readyz_turns_503_while_the_store_is_locked_and_200_after(
    gateway: Gateway, tmp_path: Path
) -> None:
    base = f"http://127.0.0.1:{gateway.port}"
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        ok = await http.get("/readyz")
        assert ok.status_code == 200 and ok.json() == {"status": "ready"}

        blocker = sqlite3.connect(tmp_path / "chatgate.db", isolation_level=None, check_same_thread=False)
        await asyncio.to_thread(blocker.execute, "BEGIN IMMEDIATE")  # holds the write lock
        try:
            down = await _readyz_until(http, 503)  # the answer may be up to WRITE_EVERY old
            body = down.json()
            assert body["status"] == "unavailable"
            assert any(reason.startswith("store:") for reason in body["reasons"]), body
            healthy = await http.get("/healthz")
            assert healthy.status_code == 200, "liveness does not depend on the store"
        finally:
            await asyncio.to_thread(blocker.execute, "ROLLBACK")
            blocker.close()

        again = await _readyz_until(http, 200)
        assert again.json() == {"status": "ready"}


async def test_status_endpoint_reports_adapters_and_queue(gateway: Gateway) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=30) as http:
        info = (await http.get("/status")).json()
    assert info["running"] is True
    assert info["adapters"]["web"]["connected"] is True
    assert info["queue_depth"] == 0
    assert (info["undelivered_replies"], info["stuck_replies"]) == (0, [])
    assert info["agent"] == "echo"


async def test_metrics_expose_the_lifecycle_histograms(gateway: Gateway) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=30) as http:
        text = (await http.get("/metrics")).text
    for name in (
        "chatgate_admission_seconds",
        "chatgate_turn_seconds",
        "chatgate_delivery_seconds",
        "chatgate_store_commit_seconds",
        "chatgate_event_loop_lag_seconds",
    ):
        assert f"# TYPE {name} histogram" in text, name


async def test_metrics_include_the_process_and_python_collectors(gateway: Gateway) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=30) as http:
        text = (await http.get("/metrics")).text
    resident = next(line for line in text.splitlines() if line.startswith("process_resident_memory_bytes "))
    assert float(resident.split()[1]) > 10 * 2**20  # a real reading of this process, not a zero
    assert "process_open_fds " in text
    assert "python_info{" in text
    assert "python_gc_objects_collected_total{" in text


async def test_readyz_turns_503_as_soon_as_shutdown_starts_while_turns_drain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    import websockets

    for name in list(__import__("os").environ):
        if name.startswith("CHATGATE_"):
            monkeypatch.delenv(name)
    config = conform(
        GatewayConfig,
        dict(
            http={"port": 0},
            agent={"echo": {"chunk_delay_ms": 300, "chunk_chars": 1}},
            shutdown={"drain_seconds": 10},
        ),
    )
    gw = Gateway(config, tmp_path)
    await gw.start()
    base = f"http://127.0.0.1:{gw.port}"
    # close_timeout: the stopped in-process server leaves the socket open, so the client's close
    # would wait its default 10 s for a TCP close that only comes with the process's exit
    async with websockets.connect(f"ws://127.0.0.1:{gw.port}/ws", close_timeout=1) as ws:
        await ws.send(json.dumps({"type": "hello", "chat_id": "c1", "user_id": "u1"}))
        await ws.send(json.dumps({"type": "message", "id": "m1", "text": "a slow one"}))
        while json.loads(await ws.recv())["type"] != "ack":
            pass
        stopping = asyncio.create_task(gw.stop())
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            while not stopping.done():
                response = await http.get("/readyz")
                if response.status_code == 503:
                    break
                await asyncio.sleep(0.01)
        assert response.status_code == 503, "not ready while draining"
        assert any("shutting down" in r for r in response.json()["reasons"])
        assert not stopping.done(), "the turn is still draining"
        await stopping


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("attacker.example:{port}", False),  # a rebinding name resolving to 127.0.0.1
        ("127.0.0.1.attacker.example", False),
        ("localhost:{port}", True),
        ("127.0.0.1:{port}", True),
        ("[::1]:{port}", True),
    ],
)
async def test_status_refuses_a_dns_rebinding_host_like_the_socket_does(
    gateway: Gateway, host: str, allowed: bool
) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=30) as http:
        answer = await http.get("/status", headers={"host": host.format(port=gateway.port)})
    if allowed:
        assert answer.status_code == 200 and answer.json()["running"] is True
    else:
        assert answer.status_code == 403
        assert "Host" in answer.json()["error"] and "pid" not in answer.json()


async def test_status_refuses_a_cross_origin_page(gateway: Gateway) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=30) as http:
        answer = await http.get("/status", headers={"origin": "http://evil.example"})
    assert answer.status_code == 403
