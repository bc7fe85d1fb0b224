"""``/model`` is the session's own and durable (issue 28): two web chat sessions of a real gateway
process, one switched to another profile, the other left alone; the process is killed (SIGKILL)
and started again, and each session still runs on its own profile, as ``/status`` says."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.fake_openai_server import API_KEY, FakeOpenAIServer, Reply, running
from support.procs import FrameClient, GatewayProcess


def _config(model: FakeOpenAIServer) -> dict[str, object]:
    endpoint = {"base_url": model.base_url, "api_key_env": "FAKE_KEY"}
    return {
        "agent": {
            "kind": "openai",
            "openai": {**endpoint, "model": "m-main"},
            "profiles": {"fast": {**endpoint, "model": "m-fast", "context_length": 8192}},
        }
    }


async def _ask(client: FrameClient, msg_id: str, text: str) -> str:
    await client.message(msg_id, text)
    return str((await client.final(msg_id, timeout=60))["text"])


def _model_for(model: FakeOpenAIServer, text: str) -> list[str]:
    """The model each upstream request that ended with ``text`` asked for."""
    return [r.body["model"] for r in model.requests if r.body["messages"][-1]["content"].endswith(text)]


async def test_a_switched_session_and_an_untouched_one_keep_their_profiles_across_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    with running() as model:
        model.script(Reply("ok"))
        gateway = GatewayProcess(tmp_path, _config(model))
        await gateway.start()
        ann, bob = FrameClient(gateway.port, "chat-ann", "ann"), FrameClient(gateway.port, "chat-bob", "bob")
        try:
            await ann.connect()
            await bob.connect()
            switched = await _ask(ann, "a1", "/model fast")
            await _ask(ann, "a2", "ann before")
            await _ask(bob, "b1", "bob before")
            await ann.close()
            await bob.close()
            await gateway.kill()

            await gateway.start()
            ann, bob = (
                FrameClient(gateway.port, "chat-ann", "ann"),
                FrameClient(gateway.port, "chat-bob", "bob"),
            )
            await ann.connect()
            await bob.connect()
            await _ask(ann, "a3", "ann after")
            await _ask(bob, "b2", "bob after")
            ann_status = await _ask(ann, "a4", "/status")
            bob_status = await _ask(bob, "b3", "/status")
        finally:
            await ann.close()
            await bob.close()
            logs = gateway.logs()
            if gateway.proc is not None and gateway.proc.returncode is None:
                await gateway.terminate()
    assert switched.startswith("Switched this session to fast"), logs[-2000:]
    started = (tmp_path / "gateway-1.log").read_text(errors="replace")
    assert f"agent openai (model m-main at {model.base_url}; profiles default, fast)" in started
    assert _model_for(model, "ann before") == _model_for(model, "ann after") == ["m-fast"]
    assert _model_for(model, "bob before") == _model_for(model, "bob after") == ["m-main"]
    assert ann_status.endswith("Model profile: fast (m-fast, 8192 tokens)")
    assert bob_status.endswith("Model profile: default (m-main)")
