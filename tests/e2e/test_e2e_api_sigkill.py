"""The API survives a SIGKILL of the gateway mid-request: the answer is fetched after the restart.

A real ``chatgate run`` subprocess, a key made with ``chatgate api-key create`` (the CLI, as an
operator would), and the official ``openai`` client. The agent streams slowly, so the kill lands
while the turn runs; the restarted gateway resumes it once, and the client gets exactly one answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest

from support.procs import GatewayProcess, wait_until

pytestmark = pytest.mark.slow
TEXT = "a question whose answer is still streaming when the gateway dies"
ANSWER = f"echo: {TEXT}"
CONFIG: dict[str, Any] = {
    "agent": {"echo": {"chunk_delay_ms": 60, "chunk_chars": 1}},
    "platforms": {"api": {"enabled": True}},
    "shutdown": {"drain_seconds": 1},
}


def create_key(gateway: GatewayProcess) -> str:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "chatgate.app.cli", "api-key", "create", "--name", "e2e"),
            *("--config", str(gateway.config_path), "--state-dir", str(gateway.state_dir)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    match = re.search(r"cg-[0-9a-f]{12}-\S+", done.stdout)
    assert match, done.stdout
    return match.group(0)


def rows(gateway: GatewayProcess, sql: str) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(gateway.state_dir / "chatgate.db", timeout=30)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def client(gateway: GatewayProcess, token: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key=token, base_url=f"http://127.0.0.1:{gateway.port}/v1", max_retries=0, timeout=60
    )


async def _completed(api: openai.AsyncOpenAI, response_id: str) -> openai.types.responses.Response:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 90
    while True:
        found = await api.responses.retrieve(response_id)
        if found.status == "completed":
            return found
        assert loop.time() < deadline, f"{response_id} is still {found.status}"
        await asyncio.sleep(0.1)


async def test_a_streamed_response_killed_mid_stream_is_fetched_after_the_restart(tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path, CONFIG)
    token = create_key(gateway)
    await gateway.start()
    try:
        async with client(gateway, token) as api:
            stream = await api.responses.create(model="chatgate", input=TEXT, stream=True)
            response_id = None
            async for event in stream:
                if event.type == "response.created":
                    response_id = event.response.id
                if event.type == "response.output_text.delta":
                    break  # mid-stream: the turn is running
            await gateway.kill()
            with contextlib.suppress(Exception):
                await stream.close()
            assert response_id is not None
            await gateway.start()
            finished = await _completed(api, response_id)
        assert finished.output_text == ANSWER
        assert rows(gateway, "SELECT status, attempts FROM inbox WHERE transport = 'api'") == [("done", 2)]
        assert rows(gateway, "SELECT COUNT(*) FROM outbox WHERE kind = 'final'") == [(1,)]
    finally:
        await gateway.terminate()


async def test_a_request_killed_before_its_answer_is_answered_once_when_retried_after_the_restart(
    tmp_path: Path,
) -> None:
    gateway = GatewayProcess(tmp_path, CONFIG)
    token = create_key(gateway)
    await gateway.start()
    headers = {"Idempotency-Key": "order-42"}
    messages: Any = [{"role": "user", "content": TEXT}]
    try:
        async with client(gateway, token) as api:
            asked = asyncio.create_task(
                api.chat.completions.create(model="chatgate", messages=messages, extra_headers=headers)
            )
            # Admitted and running: the turn has recorded its inbox row and is streaming drafts.
            await wait_until(
                lambda: rows(gateway, "SELECT attempts FROM inbox WHERE transport = 'api'") == [(1,)],
                60,
                "the request to be admitted and picked up",
            )
            await gateway.kill()
            with pytest.raises(openai.APIConnectionError):
                await asked
            await gateway.start()
            again = await api.chat.completions.create(
                model="chatgate", messages=messages, extra_headers=headers
            )
            twice = await api.chat.completions.create(
                model="chatgate", messages=messages, extra_headers=headers
            )
        assert again.choices[0].message.content == twice.choices[0].message.content == ANSWER
        assert again.id == twice.id
        assert rows(gateway, "SELECT COUNT(*) FROM inbox WHERE transport = 'api'") == [(1,)]
        assert rows(gateway, "SELECT COUNT(*) FROM outbox WHERE kind = 'final'") == [(1,)]
    finally:
        await gateway.terminate()


async def test_a_graceful_stop_ends_a_waiting_stream_with_an_error_event_and_the_answer_survives(
    tmp_path: Path,
) -> None:
    gateway = GatewayProcess(tmp_path, CONFIG)
    token = create_key(gateway)
    await gateway.start()
    try:
        async with client(gateway, token) as api:
            stream = await api.responses.create(model="chatgate", input=TEXT, stream=True)
            kinds: list[str] = []
            stopping: asyncio.Task[int] | None = None
            async for event in stream:
                kinds.append(event.type)
                if event.type == "response.created":
                    response_id = event.response.id
                if event.type == "response.output_text.delta" and stopping is None:
                    stopping = asyncio.create_task(gateway.terminate())  # SIGTERM mid-stream
            assert stopping is not None and await stopping == 0
            assert kinds[-1] == "error" and "response.completed" not in kinds
            await gateway.start()
            finished = await _completed(api, response_id)
        assert finished.output_text == ANSWER
        assert rows(gateway, "SELECT COUNT(*) FROM outbox WHERE kind = 'final'") == [(1,)]
    finally:
        await gateway.terminate()
