"""Start-up order: Telegram polls before the agent's SDK is loaded; a refused gateway loads neither.

The speed itself is bench/telegram.py's (``start_to_first_poll_s``); these tests pin the
order that makes it possible, with the real double, real gateways and ``-X importtime``.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from telegram_double import TOKEN, TOKEN_ENV, BotApiDouble, Gateways, User, echo_of, private, telegram_config

from chatgate.agents.base import Agent, AgentFailed, AgentRequest
from chatgate.agents.deferred import DeferredAgent
from chatgate.agents.echo import EchoAgent
from chatgate.app.config import GatewayConfig
from chatgate.app.gateway import Gateway
from chatgate.app.startup import build_agent
from chatgate.platforms.kit.conform import conform
from support.procs import GatewayProcess

ADA = User(9101, "Ada")


def _imported(importtime_log: str) -> set[str]:
    """Top-level package names a ``python -X importtime`` run imported (from its stderr)."""
    names = set()
    for line in importtime_log.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


@pytest.mark.slow
async def test_a_gateway_refused_for_a_held_bot_token_imports_no_http_client_nor_the_agent_sdk(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    await gateways.start(telegram_config(double, tmp_path, telegram={"allow_users": [ADA.id]}))
    config = {
        "agent": {
            "kind": "openai",
            "openai": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "SOME_KEY"},
        },
        "platforms": {
            "web": {"enabled": False},
            "telegram": {"enabled": True, "token_env": TOKEN_ENV, "api_base": double.base},
        },
        "locks": {"credential_dir": str(tmp_path / "locks")},  # the in-process gateway's
    }
    (tmp_path / "second").mkdir()
    second = GatewayProcess(tmp_path / "second", config)
    launcher = [sys.executable, "-X", "importtime", "-m", "chatgate.app.cli"]
    with pytest.MonkeyPatch.context() as env:
        env.setenv(TOKEN_ENV, TOKEN)
        env.setenv("SOME_KEY", "sk-placeholder")
        await second.start(wait=False, launcher=launcher)
    assert second.proc is not None
    assert await second.proc.wait() == 78
    log = (second.tmp / "gateway-1.log").read_text(errors="replace")  # all of it: logs() is a tail
    assert "already in use" in log, log[-2000:]
    imported = _imported(log)
    assert {"chatgate", "msgspec", "yaml"} <= imported, "no -X importtime output to check"
    assert not {"httpx", "aiohttp", "aiogram", "openai"} & imported, sorted(imported)


async def test_telegram_admits_and_acknowledges_while_the_agent_is_still_being_built(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    release = threading.Event()

    def slow_build() -> Agent:  # stands in for the OpenAI SDK's import
        release.wait(60)
        return EchoAgent(chunk_delay_ms=0)

    config = telegram_config(double, tmp_path, telegram={"allow_users": [ADA.id]})
    gateway = Gateway(config, tmp_path / "state", agent=DeferredAgent("slow", slow_build))
    gateways.started.append(gateway)
    try:
        await gateway.start()
        update_id, _ = await double.push_message(private(ADA), ADA, "are you there?")
        await double.wait_for(lambda: double.confirmed_below > update_id, what="admitted and confirmed")
        assert double.view(ADA.id) == [], "answered before the agent existed"
    finally:
        release.set()
    await double.wait_for(lambda: len(double.view(ADA.id)) == 1, what="answered once built")
    assert double.view(ADA.id)[0].text == echo_of("are you there?")


async def test_an_agent_that_cannot_be_built_ends_each_turn_with_a_non_retryable_error() -> None:
    def broken() -> Agent:
        raise RuntimeError("no such SDK")

    agent = DeferredAgent("broken", broken)
    request = AgentRequest(system="", history=(), messages=(), model_input="hi", session_key="k")
    for _ in range(2):
        events = [event async for event in agent.stream(request)]
        assert len(events) == 1 and isinstance(events[0], AgentFailed)
        assert "no such SDK" in events[0].message and not events[0].retryable
    await agent.aclose()


def test_the_openai_agent_is_deferred_and_a_missing_key_is_still_refused_at_start_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = conform(
        GatewayConfig, dict(agent={"kind": "openai", "openai": {"api_key_env": "CG_TEST_OPENAI_KEY"}})
    )
    monkeypatch.setenv("CG_TEST_OPENAI_KEY", "sk-placeholder")
    agent = build_agent(config)
    assert isinstance(agent, DeferredAgent) and agent.name == "openai"
    monkeypatch.delenv("CG_TEST_OPENAI_KEY")
    with pytest.raises(Exception, match=r"agent\.openai\.api_key_env.*CG_TEST_OPENAI_KEY"):
        build_agent(config)
