"""A real gateway process SIGKILLed while the connector re-hosts the agent's file: the re-host
posts nothing, so after the restart the file is re-hosted again and posted exactly once, its
caption marked as a possible repeat (the row was in flight, and the gateway cannot tell how far)."""

from __future__ import annotations

import asyncio
import sqlite3
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from relaysim import RelaySimulator
from support.media_files import png
from support.procs import GatewayProcess, wait_until

GW, SECRET, SECRET_ENV = "gw-sigkill", "relay-sigkill-secret", "RELAY_SIGKILL_TEST_SECRET"
CHANNEL = "932"
MARKER = "(possible repeat) "
WAIT = 60.0


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[RelaySimulator]:
    ops = ["send", "edit", "typing", "follow_up", "send_media"]
    descriptor = {"platform": "discord", "supported_ops": ops}
    simulator = RelaySimulator(tmp_path / "relay.db", {GW: [SECRET]}, [descriptor], ack_timeout=2.0)
    await simulator.start()
    try:
        yield simulator
    finally:
        await simulator.stop()


def gateway_config(sim: RelaySimulator, tmp_path: Path, workdir: Path) -> dict[str, Any]:
    relay = {
        "enabled": True,
        "url": sim.base_url,
        "gateway_id": GW,
        "secret_env": SECRET_ENV,
        "platforms": [{"platform": "discord", "bot_id": "bot1", "allow_all": True}],
        "reconnect_initial_seconds": 0.05,
        "reconnect_max_seconds": 0.5,
    }
    return {
        "agent": {"echo": {"chunk_delay_ms": 2}},
        "platforms": {"web": {"enabled": False}, "relay": relay},
        "tools": {"enabled": True, "workdir": str(workdir)},
        "locks": {"credential_dir": str(tmp_path / "locks")},
        "delivery": {"duplicate_marker": MARKER},
    }


def file_rows(state_dir: Path) -> list[tuple[str, int]]:
    db = sqlite3.connect(state_dir / "chatgate.db", timeout=30)
    try:
        return db.execute("SELECT status, attempts FROM outbox WHERE idem_key LIKE 'file:%'").fetchall()
    finally:
        db.close()


@pytest.mark.slow
async def test_sigkill_during_the_re_host_posts_the_file_once(
    sim: RelaySimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    workdir = tmp_path / "work"
    workdir.mkdir()
    image = png(40, 40, (250, 10, 10))
    (workdir / "dot.png").write_bytes(image)
    gateway = GatewayProcess(tmp_path, gateway_config(sim, tmp_path, workdir))
    sim.media.stall_uploads = 1  # the first re-host never answers: the gateway dies waiting
    await gateway.start()
    try:
        await sim.wait_connected(GW, WAIT)
        source = {"platform": "discord", "chat_id": CHANNEL, "chat_type": "dm", "user_id": "u1"}
        message = {"text": "!attach dot.png | a red dot", "message_id": "m1", "source": source}
        await sim.inject_inbound(GW, message)
        await wait_until(lambda: sim.media.uploads_seen == 1, WAIT, "the re-host")
        await gateway.kill()
        sim.media.release()
        assert [o for o in sim.ops(GW) if o.op == "send_media"] == []
        await gateway.start()
        await wait_until(lambda: any(o.op == "send_media" for o in sim.ops(GW)), WAIT, "the file posted")
        await wait_until(lambda: file_rows(gateway.state_dir) == [("sent", 2)], WAIT, "the row sent")
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
    (posted,) = [o.action for o in sim.ops(GW) if o.op == "send_media"]
    assert (posted["caption"], posted["media_kind"]) == (MARKER + "a red dot", "image")
    assert (posted["chat_id"], posted["reply_to"]) == (CHANNEL, "m1")
    fetched = await asyncio.to_thread(lambda: urllib.request.urlopen(posted["source_url"], timeout=10).read())
    assert fetched == image
    assert sim.media.uploads_seen == 2, "re-hosted once more, not again and again"
    assert SECRET not in gateway.logs()
