"""The OpenAPI document at ``/openapi.json`` matches the API: the routes it names are the routes
served, and schemathesis, generating requests from it against a real gateway subprocess, finds no
server error and no response outside the document (status, content type, schema)."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import hypothesis.strategies as st
import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, given, settings
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from chatgate.platforms.api.openapi import openapi_document
from support.procs import READY_LINE, READY_TIMEOUT, free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("api-openapi")]
CONFIG = {
    "agent": {"echo": {"chunk_delay_ms": 0}},
    "platforms": {"api": {"enabled": True, "wait_seconds": 30}},
    "shutdown": {"drain_seconds": 1},
}


def _cli(*args: str, state: Path, config: Path, **popen: object) -> list[str]:
    return [
        sys.executable,
        "-m",
        "chatgate.app.cli",
        *args,
        "--config",
        str(config),
        "--state-dir",
        str(state),
    ]


@dataclass(frozen=True)
class Served:
    base: str
    token: str
    state: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A ``chatgate run`` subprocess with the API on, and a key (a process of its own:
    schemathesis calls synchronously, which would block an in-process gateway's loop)."""
    tmp = tmp_path_factory.mktemp("openapi")
    config, state, log = tmp / "chatgate.yaml", tmp / "state", tmp / "gateway.log"
    config.write_text(yaml.safe_dump(CONFIG))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    made = subprocess.run(
        _cli("api-key", "create", state=state, config=config),
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    token = re.search(r"cg-[0-9a-f]{12}-\S+", made.stdout)
    assert token, made.stdout
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            _cli("run", "--port", str(port), state=state, config=config), stdout=out, stderr=out, env=env
        )
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while READY_LINE not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.05)
        yield Served(f"http://127.0.0.1:{port}", token.group(0), state)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-4000:]


def answered(state: Path, endpoint: str) -> int:
    """How many generated requests of ``endpoint`` reached the agent and were answered."""
    db = sqlite3.connect(state / "chatgate.db", timeout=30)
    try:
        rows = db.execute(
            "SELECT inbound_json FROM inbox WHERE transport = 'api' AND outcome = 'ok'"
        ).fetchall()
    finally:
        db.close()
    return sum(1 for (raw,) in rows if json.loads(raw)["payload"]["api"]["endpoint"] == endpoint)


SEMANTIC_REFUSALS = [positive_data_acceptance]
"""Excluded, every other check runs: a request the JSON Schema allows may still be refused with
a 400 for a rule no schema can state (the last message must be the user's and not blank, the text
within admission's limit, the body within ``max_body_bytes``, a real ``previous_response_id``)."""
OPERATIONS = [
    op.ok() for op in schemathesis.openapi.from_dict(openapi_document("chatgate")).get_all_operations()
]


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.label)
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
def test_schemathesis_finds_no_server_error_and_nothing_outside_the_document(served, operation, mode):
    """Hypothesis cases from each operation of the served document, each checked by every
    schemathesis check (no 5xx, documented status and content type, the response schema)."""
    base, token = served.base, served.token
    live = schemathesis.openapi.from_url(f"{base}/openapi.json")[operation.path][operation.method.upper()]

    strategy = live.as_strategy(generation_mode=mode)
    if mode is GenerationMode.POSITIVE:  # the documented examples too: the happy path, for sure
        strategy = st.one_of(*live.get_strategies_from_examples(), strategy)

    @given(case=strategy)
    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case: schemathesis.Case) -> None:
        case.call_and_validate(
            headers={"Authorization": f"Bearer {token}"}, excluded_checks=SEMANTIC_REFUSALS, timeout=60
        )

    run()
    endpoint = {"/v1/chat/completions": "chat", "/v1/responses": "responses"}.get(operation.path)
    if mode is GenerationMode.POSITIVE and operation.method == "post" and endpoint is not None:
        assert answered(served.state, endpoint) > 0, (
            "no generated request was answered: the happy path went untested"
        )


def test_the_document_served_is_the_one_built_and_names_every_api_route(served):
    served_doc = httpx.get(f"{served.base}/openapi.json", timeout=30).json()
    assert served_doc == openapi_document("chatgate")
    from chatgate.platforms.api.adapter import ApiAdapter, ApiSettings
    from chatgate.platforms.api.routes import api_routes

    routes = api_routes(ApiAdapter(None, None, ApiSettings()))  # type: ignore[arg-type]
    paths = {r.path for r in routes if r.path.startswith("/v1/")} - {"/v1/{rest:path}"}  # type: ignore[attr-defined]
    assert paths == set(served_doc["paths"])
    for route in routes:
        if route.path in served_doc["paths"]:  # type: ignore[attr-defined]
            methods = {m.lower() for m in route.methods} - {"head"}  # type: ignore[attr-defined]
            assert methods == set(served_doc["paths"][route.path]), route.path  # type: ignore[attr-defined]
