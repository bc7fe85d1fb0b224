"""Approval test harness: the real store, admission, scheduler, turn runner, delivery worker,
approval broker and shell tool, wired like ``chatgate.app.gateway.Gateway`` minus HTTP.

Two platforms stand at the adapter seam:

- ``text`` is a ``RecordingAdapter`` without buttons: prompts arrive as outbox notices and
  are answered with ``/approve`` and ``/deny``;
- ``btn`` is a ``ButtonAdapter``, a ``PromptingPlatform`` double that records every prompt
  shown and every resolution rendered (it can be told to refuse prompts).

The agent is the real ``EchoAgent``: a ``!sh <command>`` line is a shell tool call, run by
the real shell in ``workdir``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chatgate.agents.echo import EchoAgent
from chatgate.agents.tools.runner import ShellToolRunner
from chatgate.agents.tools.sandbox import BwrapSandbox
from chatgate.domain.approvals import ApprovalRecord
from chatgate.domain.inbound import Inbound
from chatgate.domain.media import MediaLimits
from chatgate.domain.outbound import Capabilities, Delivered, DeliveryResult, Rejected
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.prompts import Prompt, PromptResolution
from chatgate.engine.admission import Admission
from chatgate.engine.approvals import ApprovalBroker, ApprovalSettings
from chatgate.engine.authz import PlatformAccess
from chatgate.engine.delivery import DeliveryWorker
from chatgate.engine.metrics import GatewayMetrics
from chatgate.engine.pipeline import Engine, EngineSettings, MediaSettings, build_engine
from chatgate.engine.ports import Admitted
from chatgate.engine.scheduler import Scheduler
from chatgate.store.sqlite import SqliteStore
from support.engine_harness import (
    FAST_DELIVERY,
    FAST_SCHEDULER,
    FAST_TURNS,
    RecordingAdapter,
    make_inbound,
    read_db,
    wait_until,
)

TRANSPORT = "approval-test"


@dataclass
class ShownPrompt:
    chat_id: str
    prompt: Prompt
    target: dict[str, str]


class ButtonAdapter(RecordingAdapter):
    """A platform with native buttons: records ``send_prompt`` and ``resolve_prompt`` calls."""

    platform = "btn"
    capabilities = Capabilities(drafts=True, buttons=True)

    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[ShownPrompt] = []
        self.resolutions: list[tuple[str, PromptResolution]] = []
        self.refuse_prompts = False

    async def send_prompt(self, chat_id: str, prompt: Prompt, target: Mapping[str, str]) -> DeliveryResult:
        if self.refuse_prompts:
            return Rejected("buttons refused by the test")
        self.prompts.append(ShownPrompt(chat_id, prompt, dict(target)))
        return Delivered(f"pm-{prompt.prompt_id}")

    async def resolve_prompt(
        self, chat_id: str, prompt: Prompt, resolution: PromptResolution, target: Mapping[str, str]
    ) -> DeliveryResult:
        self.resolutions.append((prompt.prompt_id, resolution))
        return Delivered(prompt.message_id)

    def resolved(self, prompt_id: str) -> list[PromptResolution]:
        return [r for pid, r in self.resolutions if pid == prompt_id]


@dataclass
class ApprovalHarness:
    path: Path
    workdir: Path
    store: SqliteStore
    text: RecordingAdapter
    btn: ButtonAdapter
    broker: ApprovalBroker
    admission: Admission
    scheduler: Scheduler
    delivery: DeliveryWorker
    engine: Engine
    """The engine the parts belong to: stopped with the harness as a gateway stops it (its MCP
    servers reaped, its schedule, stuck-reply and media loops stopped), with no outbox flush."""
    _stopped: bool = False
    sent: list[Inbound] = field(default_factory=list)

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await self.engine.stop(close_budget=5.0, flush_budget=0.0)
        await self.store.close()

    # -- input
    def inbound(
        self, text: str, *, platform: str = "btn", user_name: str | None = "Ann", **kw: Any
    ) -> Inbound:
        return make_inbound(text, platform=platform, user_name=user_name, transport=TRANSPORT, **kw)

    async def send(self, text: str, **kw: Any) -> Admitted:
        inbound = self.inbound(text, **kw)
        self.sent.append(inbound)
        return await self.admission.admit(inbound)

    async def tap(self, prompt_id: str, option_id: str, **kw: Any) -> Admitted:
        """A button press carrying ``prompt_response``, as every button adapter decodes one."""
        payload = {"prompt_response": {"prompt_id": prompt_id, "option_id": option_id}}
        return await self.send(f"hp1:{prompt_id}:{option_id}", kind="button", payload=payload, **kw)

    # -- observation
    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        return read_db(self.path, sql, *params)

    def execute(self, sql: str, *params: Any) -> None:
        """Change the database file directly (to stage what a crash leaves behind)."""
        conn = sqlite3.connect(self.path, timeout=30.0)
        try:
            with conn:
                conn.execute(sql, params)
        finally:
            conn.close()

    def approvals(self) -> list[tuple[str, str, str | None, str | None]]:
        """(prompt_id, state, tier, reason) of every approval, oldest first."""
        return self.query("SELECT prompt_id, state, tier, reason FROM approvals ORDER BY requested_at, rowid")

    async def record(self, prompt_id: str) -> ApprovalRecord:
        found = await self.store.get_approval(prompt_id)
        assert found is not None
        return found

    async def prompt(self, number: int = 1, timeout: float = 10.0) -> Prompt:
        """Wait until the ``btn`` platform has shown ``number`` prompts; return the last."""
        await wait_until(lambda: len(self.btn.prompts) >= number, timeout, f"{number} prompt(s) shown")
        return self.btn.prompts[number - 1].prompt

    async def pending(self, number: int = 1, timeout: float = 10.0) -> str:
        """Wait until ``number`` approvals exist and the last one is pending; return its id."""

        def found() -> str | None:
            rows = self.approvals()
            return rows[number - 1][0] if len(rows) >= number and rows[number - 1][1] == "pending" else None

        prompt_id: str = await wait_until(found, timeout, f"approval #{number} pending")
        return prompt_id

    async def delivered(
        self, adapter: RecordingAdapter, predicate: Callable[[OutboxRow], bool], timeout: float = 10.0
    ) -> OutboxRow:
        row: OutboxRow = await wait_until(
            lambda: next((r for r in adapter.delivered if predicate(r)), None),
            timeout,
            "a delivery matching the predicate",
        )
        return row

    async def final_for(self, adapter: RecordingAdapter, inbound: Inbound, timeout: float = 10.0) -> str:
        row = await self.delivered(
            adapter, lambda r: r.kind == "final" and r.in_reply_to == inbound.message_ref, timeout
        )
        return row.text


MakeApprovals = Callable[..., Awaitable[ApprovalHarness]]


@pytest.fixture
async def make_approvals(tmp_path: Path) -> AsyncIterator[MakeApprovals]:
    """Build and start a harness: ``await make_approvals(timeout=300, approvers=None, agent=None)``
    (``agent``: any ``Agent``; the echo agent by default; ``sandbox=True``: commands run in bwrap;
    ``mcp``: an ``McpHub`` whose servers the engine starts and, at the harness's stop, closes; ``media=True``:
    files are taken into the blob store under ``tmp_path``)."""
    built: list[ApprovalHarness] = []

    async def make(
        *,
        timeout: float = 300.0,
        approvers: Mapping[str, frozenset[str]] | None = None,
        db: str = "chatgate.db",
        rules: tuple[Any, ...] = (),
        agent: Any = None,
        sandbox: bool = False,
        mcp: Any = None,
        media: bool = False,
    ) -> ApprovalHarness:
        path = tmp_path / db
        workdir = tmp_path / "work"
        workdir.mkdir(exist_ok=True)
        metrics = GatewayMetrics()
        store = SqliteStore(path)
        text, btn = RecordingAdapter(), ButtonAdapter()
        text.platform = "text"
        engine = build_engine(
            store,
            agent or EchoAgent(chunk_delay_ms=0),
            EngineSettings(
                owner=f"owner-{len(built)}",
                access={"text": PlatformAccess(allow_all=True), "btn": PlatformAccess(allow_all=True)},
                turns=FAST_TURNS,
                scheduler=FAST_SCHEDULER,
                delivery=FAST_DELIVERY,
                approvals=ApprovalSettings(timeout_s=timeout, approvers=dict(approvers or {}), rules=rules),
                shell=ShellToolRunner(
                    workdir,
                    timeout_s=600.0 if sandbox else 30.0,
                    output_cap=4000,
                    sandbox=BwrapSandbox(workdir) if sandbox else None,
                ),
                mcp=mcp,
                media=MediaSettings(MediaLimits(), tmp_path / "blobs" / "tmp") if media else None,
            ),
            metrics,
            adapters={"text": text, "btn": btn},
        )
        broker, admission, scheduler, delivery = (
            engine.approvals,
            engine.admission,
            engine.scheduler,
            engine.delivery,
        )
        harness = ApprovalHarness(
            path, workdir, store, text, btn, broker, admission, scheduler, delivery, engine
        )
        built.append(harness)
        await engine.open()
        engine.start()
        return harness

    yield make
    for harness in reversed(built):
        await asyncio.wait_for(harness.stop(), 30)
