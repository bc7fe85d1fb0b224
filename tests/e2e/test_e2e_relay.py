"""A real `chatgate run` behind the relay simulator, SIGKILLed between its commit and its ack.

The simulator drops the gateway's acks (as if the process died before sending
them); the gateway is SIGKILLed once both buffered deliveries are committed and
their acks lost, then restarted. The connector replays both; each is
acknowledged as a duplicate and answered exactly once.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from relaysim import RelaySimulator
from support.procs import GatewayProcess, wait_until

pytestmark = pytest.mark.slow

GW = "e2e-gw"
SECRET = "e2e-relay-secret"


_wait = wait_until


def _rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


async def test_sigkill_after_commit_before_ack_is_replayed_acked_and_answered_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_env = "E2E_RELAY_SECRET"  # GatewayProcess drops CHATGATE_* variables from the child's env
    monkeypatch.setenv(secret_env, SECRET)
    sim = RelaySimulator(tmp_path / "relay.db", {GW: [SECRET]}, [{"platform": "discord"}], ack_timeout=2.0)
    await sim.start()
    config = {
        # Slow enough that the kill lands before the reply: the restart must produce it, once.
        "agent": {"echo": {"chunk_delay_ms": 1500}},
        "locks": {"credential_dir": str(tmp_path / "locks")},
        "platforms": {
            "relay": {
                "enabled": True,
                "url": sim.base_url,
                "gateway_id": GW,
                "secret_env": secret_env,
                "platforms": [{"platform": "discord", "bot_id": "b1", "allow_all": True}],
                "reconnect_initial_seconds": 0.1,
                "reconnect_max_seconds": 1,
            }
        },
    }
    gateway = GatewayProcess(tmp_path, config)
    try:
        await gateway.start()
        await sim.wait_connected(GW, 30)
        sim.lose_acks(GW)
        event = {
            "text": "hello",
            "message_id": "m1",
            "source": {
                "platform": "discord",
                "chat_id": "c1",
                "chat_type": "dm",
                "user_id": "u1",
                "user_name": "Ann",
            },
        }
        body = {
            "id": "i1",
            "type": 2,
            "channel_id": "c1",
            "channel": {"id": "c1", "type": 1},
            "user": {"id": "u1", "username": "ann"},
            "data": {"type": 1, "name": "ask", "options": [{"name": "prompt", "type": 3, "value": "x"}]},
        }
        text_buffer = await sim.inject_inbound(GW, event)
        forward_buffer = await sim.inject_passthrough(GW, json.dumps(body).encode())
        await _wait(lambda: {text_buffer, forward_buffer} <= set(sim.lost_acks(GW)), 30, "both acks (lost)")
        await gateway.kill()
        db = gateway.state_dir / "chatgate.db"
        assert sorted(r[0] for r in _rows(db, "SELECT delivery_id FROM inbox")) == [
            "discord:c1:m1",
            "discord:interaction:i1",
        ]  # committed before the ack that was lost
        assert set(sim.unacked(GW)) == {text_buffer, forward_buffer}
        sim.lose_acks(GW, False)

        await gateway.start()
        await sim.wait_acked(text_buffer, 60)
        await sim.wait_acked(forward_buffer, 60)
        replays = [d.buffer_id for d in sim.deliveries(GW) if d.replay]
        assert replays == [text_buffer, forward_buffer]  # in order
        await _wait(
            lambda: (
                any(o.action.get("content") == "echo: hello" for o in sim.ops(GW))
                and any(o.action.get("content") == "echo: x" for o in sim.ops(GW))
            ),
            60,
            "both answers",
        )
        await gateway.terminate()
        contents = [o.action.get("content") for o in sim.ops(GW) if o.op in ("send", "edit", "follow_up")]
        assert contents.count("echo: hello") == 1, contents
        assert contents.count("echo: x") == 1, contents
        assert not [c for c in contents if isinstance(c, str) and "possible repeat" in c], contents
        # The resumed turn's reply carries the egress discriminators from the stored source.
        final = next(o for o in sim.ops(GW) if o.action.get("content") == "echo: hello")
        assert final.action["metadata"]["user_id"] == "u1" and final.action["chat_id"] == "c1"
        assert _rows(db, "SELECT COUNT(*) FROM inbox") == [(2,)]
        assert _rows(db, "SELECT COUNT(*) FROM inbox WHERE status = 'done'") == [(2,)]
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
        await sim.stop()
