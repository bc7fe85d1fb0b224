"""``chatgate init`` for an OpenAI-compatible agent, through a real pseudo-terminal: it calls
the endpoint's ``GET /models`` (the fake server, a real HTTP server), shows the list, writes
the model picked, and a real ``chatgate run`` on the written file answers with that model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
import yaml
from fake_openai_server import API_KEY, FakeOpenAIServer, Reply

from support.procs import GatewayProcess
from support.web_harness import WebClient

pytestmark = pytest.mark.slow
KEY_ENV = "FAKE_OPENAI_KEY"


def _env(tmp_path: Path, key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATGATE_", "DBUS_"))}
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"), TERM="dumb")
    env[KEY_ENV] = key
    return env


async def test_init_lists_the_endpoints_models_and_the_gateway_answers_with_the_one_picked(
    server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.models = ["fake-large", "fake-small"]
    server.script(Reply("hello from the fake model", chunks=3))
    target = tmp_path / "chatgate.yaml"
    child = pexpect.spawn(
        sys.executable, ["-m", "chatgate", "init", "--write", str(target), "--no-service"],
        env=_env(tmp_path, API_KEY), encoding="utf-8", timeout=60,
    )  # fmt: skip
    try:
        child.expect(r"\[echo\]: ")
        child.sendline("openai")
        child.expect(r"Base URL of the endpoint \[https://api\.openai\.com/v1\]: ")
        child.sendline(server.base_url)
        child.expect(r"holding the API key \[OPENAI_API_KEY\]: ")
        child.sendline(KEY_ENV)
        child.expect(r"The endpoint answers; models: fake-large, fake-small")
        child.expect(r"Model \[fake-large\]: ")
        child.sendline("fake-small")
        child.expect(r"Platforms, comma-separated .*\[web\]: ")
        child.sendline("web")
        child.expect(r"\(y/n\) \[y\]: ")
        child.sendline("y")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    assert API_KEY not in target.read_text()
    assert yaml.safe_load(target.read_text())["agent"] == {
        "kind": "openai",
        "openai": {"base_url": server.base_url, "model": "fake-small", "api_key_env": KEY_ENV},
    }

    (tmp_path / "run").mkdir()
    gateway = GatewayProcess(tmp_path / "run", {})
    gateway.config_path = target
    await gateway.start(launcher=["env", f"{KEY_ENV}={API_KEY}", sys.executable, "-m", "chatgate.app.cli"])
    try:
        client = await WebClient.connect(gateway.port)
        await client.hello("chat-1")
        frames = await client.ask("m1", "hi")
        assert frames[-1]["text"] == "hello from the fake model"
        await client.close()
    finally:
        await gateway.kill()
    assert server.requests[-1].body["model"] == "fake-small"


def test_a_key_the_endpoint_refuses_stops_a_scripted_init_and_is_never_shown(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    target = tmp_path / "chatgate.yaml"
    wrong = "sk-wrong-0123456789abcdef0123456789"
    done = subprocess.run(
        [sys.executable, "-m", "chatgate", "init", "--write", str(target), "--yes", "--agent", "openai",
         "--openai-base-url", server.base_url, "--openai-key-env", KEY_ENV, "--platform", "web"],
        env=_env(tmp_path, wrong), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "refused the credential (HTTP 401)" in done.stdout + done.stderr
    assert wrong not in done.stdout + done.stderr
    assert not target.exists()


def test_typos_and_a_failed_check_are_asked_again_and_nothing_typed_is_lost(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Issue 31, item 3: a URL without http://, an endpoint that does not answer (then 'n' to keep
    it anyway: corrected, not the end), a misspelt platform named with its nearest one."""
    server.models = ["fake-large"]
    target = tmp_path / "chatgate.yaml"
    child = pexpect.spawn(
        sys.executable, ["-m", "chatgate", "init", "--write", str(target), "--no-service"],
        env=_env(tmp_path, API_KEY), encoding="utf-8", timeout=60,
    )  # fmt: skip
    steps = [
        (r"\[echo\]: ", "openai"),
        (r"Base URL of the endpoint \[https://api\.openai\.com/v1\]: ", "127.0.0.1:9/v1"),
        (r"'127\.0\.0\.1:9/v1' is not an http:// or https:// URL.*\n.*Base URL of the endpoint .*: ",
         "http://127.0.0.1:9/v1"),
        (r"holding the API key \[OPENAI_API_KEY\]: ", KEY_ENV),
        (r"The endpoint check failed: .*Keep these settings anyway\? \(y/n\) \[n\]: ", "n"),
        (r"Then correct them.*Base URL of the endpoint \[http://127\.0\.0\.1:9/v1\]: ", server.base_url),
        (rf"holding the API key \[{KEY_ENV}\]: ", ""),
        (r"The endpoint answers; models: fake-large.*Model \[fake-large\]: ", ""),
        (r"Platforms, comma-separated .*\[web\]: ", "web, discrod"),
        (r"'discrod'.*did you mean 'discord'.*\n.*Platforms, comma-separated .*\[web\]: ", "web"),
        (r"\(y/n\) \[y\]: ", "y"),
    ]  # fmt: skip
    try:
        for shown, typed in steps:
            child.expect(shown)
            child.sendline(typed)
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    agent = yaml.safe_load(target.read_text())["agent"]
    assert agent["kind"] == "openai" and agent["openai"]["base_url"] == server.base_url
    assert agent["openai"]["api_key_env"] == KEY_ENV and agent["openai"]["model"] == "fake-large"
