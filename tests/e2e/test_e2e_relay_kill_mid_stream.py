"""A real ``chatgate run`` behind the relay simulator, SIGKILLed while a reply is streaming.

The killed process leaves a preview (text with the cursor) on the relayed platform. The
next start takes that message over: it becomes the "restarted while answering" notice,
the re-answer follows it as one message, and no cursor stays.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from relaysim import RelaySimulator
from support.procs import GatewayProcess, wait_until

pytestmark = pytest.mark.slow
GW = "kill-gw"
SECRET = "kill-relay-secret"
CURSOR = "▍"
RESUME_NOTICE = "The gateway restarted while answering this message"


async def test_a_kill_mid_stream_on_the_relay_leaves_no_preview_and_the_notice_comes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KILL_RELAY_SECRET", SECRET)
    sim = RelaySimulator(tmp_path / "relay.db", {GW: [SECRET]}, [{"platform": "discord"}])
    await sim.start()
    config = {
        "agent": {"echo": {"chunk_delay_ms": 120, "chunk_chars": 2}},
        "locks": {"credential_dir": str(tmp_path / "locks")},
        "platforms": {
            "relay": {
                "enabled": True,
                "url": sim.base_url,
                "gateway_id": GW,
                "secret_env": "KILL_RELAY_SECRET",
                "platforms": [{"platform": "discord", "bot_id": "b1", "allow_all": True}],
                "reconnect_initial_seconds": 0.1,
                "reconnect_max_seconds": 1,
            }
        },
    }
    gateway = GatewayProcess(tmp_path, config)
    text = "a long question whose answer streams for several seconds, " * 2
    answer = f"echo: {text}"

    def live() -> list[tuple[str, str]]:
        return [(m.message_id, m.content) for m in sim.messages(GW) if not m.deleted and m.chat_id == "c1"]

    try:
        await gateway.start()
        await sim.wait_connected(GW, 30)
        source = {"platform": "discord", "chat_id": "c1", "chat_type": "dm", "user_id": "u1"}
        await sim.inject_inbound(GW, {"text": text, "message_id": "m1", "source": source})
        await wait_until(lambda: any(c.endswith(CURSOR) for _, c in live()), 60, "a streamed preview")
        ((stale, _),) = [(mid, c) for mid, c in live() if c.endswith(CURSOR)]
        await wait_until(lambda: gateway.recorded_preview() == stale, 30, "the preview's record")
        await gateway.kill()
        await gateway.start()
        await wait_until(lambda: any(c == answer for _, c in live()), 60, "the re-answer")
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
        await sim.stop()
    shown = live()
    assert not any(c.endswith(CURSOR) for _, c in shown), shown
    assert shown[0][0] == stale and shown[0][1].startswith(RESUME_NOTICE), shown
    assert [c for _, c in shown[1:]] == [answer], shown
