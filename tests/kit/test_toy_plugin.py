"""A platform is its folder and one registry line: the toy platform, registered by one line,
runs in a real gateway from its config section; and a platform whose start fails leaves
nothing behind (no task, socket, lock or thread).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from toy_plugin import BrokenStart

from chatgate.app import registry
from chatgate.app.config import ConfigError, GatewayConfig, load_config
from chatgate.app.gateway import Gateway
from chatgate.app.locks import credential_lock, is_held
from chatgate.platforms.kit.conform import conform
from support.engine_harness import wait_until
from support.procs import free_port

TIMEOUT = 20.0


@pytest.fixture(autouse=True)
def _toy_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.PLUGINS, "toy", "toy_plugin:PLUGIN")  # the one line


def _config(tmp_path: Path, **toy: Any) -> GatewayConfig:
    return conform(
        GatewayConfig,
        dict(
            http={"port": 0},
            agent={"echo": {"chunk_delay_ms": 0}},
            locks={"credential_dir": str(tmp_path / "locks")},
            platforms={"web": {"enabled": False}, "toy": {"enabled": True, "allow_users": ["alice"], **toy}},
        ),
    )


async def _line(reader: asyncio.StreamReader) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(await asyncio.wait_for(reader.readline(), TIMEOUT))
    return frame


async def test_a_registered_toy_platform_answers_from_its_config_section(tmp_path: Path) -> None:
    gateway = Gateway(_config(tmp_path), tmp_path / "state")
    await gateway.start()
    try:
        toy = gateway.adapters["toy"]
        reader, writer = await asyncio.open_connection("127.0.0.1", toy.port)  # type: ignore[attr-defined]
        writer.write(b'{"id": "l1", "chat": "c1", "user": "alice", "text": "hello toy"}\n')
        await writer.drain()
        ack = await _line(reader)
        assert ack == {"type": "ack", "id": "l1", "duplicate": False}
        reply = await _line(reader)
        assert (reply["type"], reply["in_reply_to"], reply["text"]) == ("reply", "l1", "echo: hello toy")
        writer.close()
    finally:
        await gateway.stop()


def test_a_misspelt_platform_section_is_named_with_the_nearest_platform(tmp_path: Path) -> None:
    path = tmp_path / "chatgate.yaml"
    path.write_text("platforms:\n  tyo:\n    enabled: true\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "platforms.tyo (line 2): unknown key; did you mean 'toy'?" in str(err.value)


def test_a_toy_key_mistake_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "chatgate.yaml"
    path.write_text("platforms:\n  toy:\n    enabled: true\n    prot: 7\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "platforms.toy.prot (line 4): unknown key; did you mean 'port'?" in str(err.value)


def _refused(port: int) -> bool:
    with socket.socket() as client:
        return client.connect_ex(("127.0.0.1", port)) != 0


async def test_a_platform_whose_start_raises_leaves_no_task_socket_lock_or_thread(tmp_path: Path) -> None:
    http_port = free_port()
    toy_port = next(p for p in iter(free_port, None) if p != http_port)
    config = _config(tmp_path, port=toy_port, fail_at_start=True)
    config.http.port = http_port
    threads_before = set(threading.enumerate())
    tasks_before = asyncio.all_tasks()
    gateway = Gateway(config, tmp_path / "state")
    with pytest.raises(BrokenStart):
        await gateway.start()  # no stop(): a start that fails closes what it opened itself
    # no task: everything the start spawned was cancelled and awaited
    assert asyncio.all_tasks() == tasks_before
    # no socket: the HTTP port and the toy's own server are closed
    assert _refused(toy_port) and _refused(http_port)
    # no lock: the toy's credential lock is free again
    lock_dir = tmp_path / "locks"
    assert not is_held(credential_lock(lock_dir, "toy", f"port:{toy_port}").path)

    # no thread: the store's writer and readers are gone (the loop's own executor, which
    # ``asyncio.to_thread`` shares with everything on this loop, is the loop's, not the gateway's)
    def ours() -> set[threading.Thread]:
        return {t for t in set(threading.enumerate()) - threads_before if not t.name.startswith("asyncio_")}

    # a thread joins as it finishes its last item: waited for, never slept on
    await wait_until(lambda: not ours(), TIMEOUT, "the store's threads to end")
    # and the state it opened is reusable: a second gateway on the same directory starts
    config = _config(tmp_path, port=toy_port)
    again = Gateway(config, tmp_path / "state")
    await again.start()
    await again.stop()
