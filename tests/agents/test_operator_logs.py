"""What a real run leaves in the log for an operator: each agent failure once, at WARNING, with
its session and reason; never the API key; never a Python repr (issue 18, item 4).

A real gateway subprocess runs the openai agent against the fake OpenAI-compatible server (a
real HTTP server the unmodified SDK talks to); the web chat is driven over a real socket.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from fake_openai_server import API_KEY, Fail, FakeOpenAIServer, Reply

from support.procs import GatewayProcess
from support.web_harness import WebClient

KEY_ENV = "FAKE_OPENAI_KEY"
PYTHON_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>|\b[A-Z]\w*\((?:\w+=)|\bTraceback\b")


async def test_an_agent_failure_is_one_warning_naming_the_session_and_no_line_has_a_secret_or_a_repr(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    server.script(
        Reply("first answer"),
        Fail(400, "the model refused this request", type="invalid_request_error", code="refused"),
    )
    config = {
        "agent": {"kind": "openai", "openai": {"base_url": server.base_url, "model": "fake-model"}},
    }
    config["agent"]["openai"]["api_key_env"] = KEY_ENV  # type: ignore[index]
    gateway = GatewayProcess(tmp_path, config)
    await gateway.start(launcher=["env", f"{KEY_ENV}={API_KEY}", sys.executable, "-m", "chatgate.app.cli"])
    try:
        client = await WebClient.connect(gateway.port)
        await client.hello("chat-1")
        assert (await client.ask("m1", "hi"))[-1]["text"] == "first answer"
        failed = (await client.ask("m2", "again"))[-1]["text"]
        # The user reads a short reason and an id, never the endpoint's words, host or port.
        error_id = re.fullmatch(r"Sorry, I could not answer: .* \(error id (err-[0-9a-f]{10})\)\.", failed)
        assert error_id is not None, failed
        assert "refused" not in failed and "127.0.0.1" not in failed and "400" not in failed
        await client.close()
    finally:
        assert await gateway.terminate() == 0
    log = (tmp_path / "gateway-1.log").read_text(errors="replace")
    lines = log.splitlines()

    warnings = [line for line in lines if " WARNING " in line]
    assert len(warnings) == 1, "\n".join(warnings)
    assert "the agent failed" in warnings[0]
    assert "session_key=agent:main:web:dm:chat-1" in warnings[0]
    assert "the model refused this request" in warnings[0]
    assert error_id.group(1) in warnings[0], "the operator greps the id the user was given"
    assert "will_retry=false" in warnings[0] and "retryable" not in warnings[0]
    assert API_KEY not in log and API_KEY[-12:] not in log
    reprs = [line for line in lines if PYTHON_REPR.search(line)]
    assert reprs == [], "\n".join(reprs)
    assert any(" started: state dir " in line for line in lines), "the start line is there"


async def test_turns_at_info_log_no_line_per_http_request(server: FakeOpenAIServer, tmp_path: Path) -> None:
    """Issue 33, item 6: at INFO the OpenAI SDK's HTTP client (httpx, or httpx2 in newer SDKs)
    logged one "HTTP Request: ..." line per model call, 550 of 562 lines in a 500-message run.
    Now a turn adds at most one line at INFO, and none of them is a library's request line."""
    server.script(Reply("an answer", chunks=3))
    config = {
        "log_level": "INFO",
        "agent": {"kind": "openai", "openai": {"base_url": server.base_url, "model": "fake-model"}},
    }
    config["agent"]["openai"]["api_key_env"] = KEY_ENV  # type: ignore[index]
    gateway = GatewayProcess(tmp_path, config)
    await gateway.start(launcher=["env", f"{KEY_ENV}={API_KEY}", sys.executable, "-m", "chatgate.app.cli"])
    turns = 5
    try:
        client = await WebClient.connect(gateway.port)
        await client.hello("chat-1")
        for n in range(turns):
            assert (await client.ask(f"m{n}", "hi"))[-1]["text"] == "an answer"
        await client.close()
    finally:
        assert await gateway.terminate() == 0
    assert len(server.requests) == turns
    lines = (tmp_path / "gateway-1.log").read_text(errors="replace").splitlines()
    chatter = [line for line in lines if "HTTP Request:" in line or re.search(r" INFO http(x|core)", line)]
    assert chatter == [], "\n".join(chatter)
    ready = next(i for i, line in enumerate(lines) if " is running: " in line)
    stopping = next(i for i, line in enumerate(lines) if "shutting down" in line)
    during = [line for line in lines[ready + 1 : stopping] if not line.startswith("state: ")]
    assert len(during) <= turns, "\n".join(during)  # at most one line per turn
