"""The pipeline, built once: admission → inbox → scheduler → turn → outbox → delivery.

``build_engine`` is the only place the stages are wired, for the gateway and for
every test harness. Stages that must reach a stage built after them (admission
wakes the scheduler; the approval desk stops a session) hold the ``Engine``
itself as their events port; it forwards to the stage once that exists.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

import msgspec

from chatgate.agents.base import Agent, ToolRunner
from chatgate.agents.tools.mcp_hub import McpHub
from chatgate.agents.tools.runner import ShellToolRunner
from chatgate.domain.approvals import ApprovalRecord
from chatgate.domain.media import MediaLimits
from chatgate.domain.pairing import PairingLimits
from chatgate.domain.session_key import IsolationPolicy, PolicyOverride
from chatgate.domain.store_roles import (
    Approvals,
    Inbox,
    Labels,
    Leases,
    Lifecycle,
    Media,
    Outbox,
    Pairing,
    Schedules,
    SessionProfiles,
    Tasks,
    Transcript,
)
from chatgate.engine.admission import Admission
from chatgate.engine.approvals import ApprovalBroker, ApprovalSettings, ShellTools, ToolContext
from chatgate.engine.approvals.mcp_tools import McpTools
from chatgate.engine.approvals.tools import AttachSettings
from chatgate.engine.authz import Authorizer, PlatformAccess
from chatgate.engine.delivery import DeliverySettings, DeliveryWorker
from chatgate.engine.intake import EngineIntake
from chatgate.engine.media_fetch import MediaFetcher
from chatgate.engine.metrics import GatewayMetrics
from chatgate.engine.model_command import ModelCommands
from chatgate.engine.ports import Adapter, group_classifier
from chatgate.engine.ratelimit import PlatformLimits, RateBudget, RateOverride
from chatgate.engine.schedule_commands import ScheduleCommands
from chatgate.engine.scheduler import Scheduler
from chatgate.engine.schedules import ScheduleRunner, ScheduleSettings, configured
from chatgate.engine.scheduling import SchedulerSettings
from chatgate.engine.stuck_replies import StuckReplyWatch
from chatgate.engine.tasks import BackgroundTasks, CombinedTools, TaskSettings
from chatgate.engine.turn import TurnRunner, TurnSettings
from chatgate.engine.typing_indicators import TypingIndicators

log = logging.getLogger(__name__)


class EngineStore(
    Lifecycle,
    Inbox,
    Leases,
    Transcript,
    Outbox,
    Approvals,
    Labels,
    Pairing,
    Schedules,
    Tasks,
    SessionProfiles,
    Media,
    Protocol,
):
    """Every store role the engine's stages use between them (cursors belong to adapters)."""


class EngineSettings(msgspec.Struct, frozen=True):
    owner: str
    access: Mapping[str, PlatformAccess] = msgspec.field(default_factory=dict)
    """Who may talk, per platform (default deny: a platform without an entry is refused)."""
    profile: str | None = None
    isolation: IsolationPolicy = IsolationPolicy()
    overrides: Mapping[str, PolicyOverride] = msgspec.field(default_factory=dict)
    turns: TurnSettings = TurnSettings()
    scheduler: SchedulerSettings = SchedulerSettings()
    delivery: DeliverySettings = DeliverySettings()
    approvals: ApprovalSettings = msgspec.field(default_factory=ApprovalSettings)
    shell: ShellToolRunner | None = None
    """The shell tool, when tools are enabled: every call goes through the approval gate."""
    mcp: McpHub | None = None
    """The MCP servers (``agent.mcp``), started at open and closed at stop; their tools go
    through the approval gate too."""
    rate_limits: Mapping[str, RateOverride] = msgspec.field(default_factory=dict)
    """Per platform, the operator's rate limits over the adapter's declared ones."""
    pairing: PairingLimits = PairingLimits()
    """Code lifetime and the bounds on strangers' codes, for platforms with ``pairing`` on."""
    schedules: ScheduleSettings | None = msgspec.field(default_factory=ScheduleSettings)
    """The schedule runner and the chat's schedule commands; None turns both off."""
    tasks: TaskSettings | None = msgspec.field(default_factory=TaskSettings)
    """Background tasks (``/bg``) and, with ``delegation``, the agent's ``delegate`` tool."""
    media: MediaSettings | None = None
    """Fetching attachments before a turn (``engine/media_fetch.py``); None leaves them unfetched."""
    attach: AttachLimits | None = None
    """The shell tool's companion ``attach_file`` (the agent sends files); None: not offered."""


class AttachLimits(msgspec.Struct, frozen=True):
    max_bytes: int
    scratch: Path
    """Where a file is copied before the blob store takes it in (beside it: a rename)."""


class MediaSettings(msgspec.Struct, frozen=True):
    limits: MediaLimits
    scratch: Path
    """Where downloads are written while they stream (beside the blob store: taking one in is a rename)."""


class Engine:
    """The wired pipeline and its events port (``session_queued``, ``outbox_changed``, ``stop_session``)."""

    def __init__(
        self, store: EngineStore, agent: Agent, metrics: GatewayMetrics, settings: EngineSettings
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.settings = settings
        self.adapters: dict[str, Adapter] = {}
        self.budget = RateBudget()
        self.typist = TypingIndicators(self.budget)
        self.delivery = DeliveryWorker(
            store,
            self.adapters,
            metrics,
            settings.delivery,
            self.budget,
            typist=self.typist,
            blobs=store,
            duplicate_marker=settings.turns.duplicate_marker,
        )
        self.stuck = StuckReplyWatch(store, metrics)
        self.approvals = ApprovalBroker(
            store,
            self.adapters,
            settings.approvals,
            on_outbox=self.outbox_changed,
            stop_session=self.stop_session,
        )
        self.admission = Admission(
            store,
            Authorizer(settings.access, store),
            metrics,
            profile=settings.profile,
            isolation=settings.isolation,
            overrides=settings.overrides,
            on_queued=self.session_queued,
            on_reply=self.outbox_changed,
            stop_session=self.stop_session,
            approvals=self.approvals,
            pairing=settings.pairing,
        )
        self.intake = EngineIntake(self.admission, store, metrics)
        self.tools = self._shell_tools()
        self.tasks = self._build_tasks(settings.tasks)
        self.media = self._media_fetcher(settings.media)
        self.runner = self._build_runner(agent)
        self.scheduler = self._build_scheduler()
        if store.claims_on_admit:
            self.admission.use_slots(self.scheduler)
        self.schedules = self._build_schedules(settings.schedules)
        self._add_model_commands(settings.turns)

    def _shell_tools(self) -> ShellTools | None:
        settings = self.settings
        if settings.shell is None:
            return None
        attach = settings.attach
        files = AttachSettings(self.store, attach.scratch, attach.max_bytes) if attach is not None else None
        return ShellTools(self.approvals, settings.shell, files)

    def _build_runner(self, agent: Agent) -> TurnRunner:
        return TurnRunner(
            self.store,
            agent,
            self.adapters,
            self.admission.policy_for,
            self.settings.turns,
            self.budget,
            on_preview=self._count_preview,
            tools=self._tools_factory(),
            owner=self.settings.owner,
            on_outbox=self.outbox_changed,
            typist=self.typist,
            media=self.media,
        )

    def _build_scheduler(self) -> Scheduler:
        settings = self.settings
        return Scheduler(
            self.store,
            self.runner,
            self.metrics,
            settings.owner,
            settings.scheduler,
            on_committed=self.outbox_changed,
            sends=self.delivery,
        )

    def _media_fetcher(self, settings: MediaSettings | None) -> MediaFetcher | None:
        if settings is None:
            return None
        return MediaFetcher(self.store, self.adapters, settings.limits, settings.scratch)

    def _build_tasks(self, settings: TaskSettings | None) -> BackgroundTasks | None:
        if settings is None:
            return None
        desk = BackgroundTasks(self.store, self.session_queued, self.stop_session, settings)
        if settings.commands:
            self.admission.add_handler("bg", desk.bg)
            self.admission.add_handler("tasks", desk.list)
            self.admission.add_handler("cancel", desk.cancel_command)
        return desk

    def _tools_factory(self) -> Callable[[ToolContext], ToolRunner] | None:
        """Each turn's tools: the shell and MCP tools (behind approvals) and ``delegate``, whichever
        are on. A task's own child session gets no ``delegate``: a sub-agent does not fan out further."""
        hub = self.settings.mcp
        self.mcp = McpTools(self.approvals, hub, self.media) if hub is not None else None
        shell, mcp, desk = self.tools, self.mcp, self.tasks
        delegate = desk if desk is not None and desk.settings.delegation else None
        if shell is None and mcp is None and delegate is None:
            return None

        def for_turn(ctx: ToolContext) -> ToolRunner:
            runners = [shell.for_turn(ctx)] if shell is not None else []
            if mcp is not None:
                runners.append(mcp.for_turn(ctx))
            if delegate is not None and ":task:" not in ctx.session_key:
                runners.append(delegate.for_turn(ctx))
            return runners[0] if len(runners) == 1 else CombinedTools(runners)

        return for_turn

    def _add_model_commands(self, turns: TurnSettings) -> None:
        """``/model`` and ``/status`` (which names the session's profile) over the profiles."""
        models = ModelCommands(self.store, turns.profiles)
        self.admission.add_handler("model", models.model)
        self.admission.add_handler("status", models.status)

    def _build_schedules(self, settings: ScheduleSettings | None) -> ScheduleRunner | None:
        if settings is None:
            return None
        runner = ScheduleRunner(self.store, self.admission, self.outbox_changed, settings)
        commands = ScheduleCommands(self.store, runner, settings.limits)
        self.admission.add_handler("remind", commands.remind)
        self.admission.add_handler("every", commands.every)
        self.admission.add_handler("schedules", commands.manage)
        return runner

    # ------------------------------------------------------------ events port

    def session_queued(self, session_key: str) -> None:
        self.scheduler.on_queued(session_key)

    def outbox_changed(self) -> None:
        self.delivery.wake()

    async def stop_session(self, session_key: str) -> None:
        await self.scheduler.stop_session(session_key)

    def _count_preview(self, platform: str, op: str) -> None:
        self.metrics.preview_updates.labels(platform, op).inc()

    # ------------------------------------------------------------ adapters and lifetime

    def add_adapter(self, adapter: Adapter) -> None:
        """Register a platform: its rate limits join the shared budget; delivery and turns reach it."""
        caps = adapter.capabilities
        declared = PlatformLimits(
            caps.chat_min_interval,
            caps.platform_max_rate,
            caps.group_max_per_minute,
            is_group=group_classifier(adapter),
        )
        override = self.settings.rate_limits.get(adapter.platform, RateOverride())
        self.budget.configure(adapter.platform, override.apply(declared))
        self.adapters[adapter.platform] = adapter

    async def open(self) -> list[ApprovalRecord]:
        """Open the store and take over what a previous process left; returns prompts it expired."""
        await self.store.open()
        released = await self.store.recover(self.settings.owner)
        if released:
            log.warning("resuming %d session(s) a previous gateway left unfinished", released)
        if self.tasks is not None:
            await self.tasks.close_stale()
        if self.schedules is not None and self.settings.schedules is not None:
            jobs = configured(self.settings.schedules.jobs, self.admission.key_for_source, time.time())
            await self.schedules.sync_config(jobs)
        # Before any turn runs: a prompt left open by the old process has no one waiting on it.
        expired = await self.approvals.recover()
        if self.settings.mcp is not None:
            await self.settings.mcp.start()  # the tools are listed before the first turn
        return expired

    async def close_mcp(self) -> None:
        """Stop the MCP servers (idempotent): at ``stop``, or when a start fails after ``open``."""
        if self.settings.mcp is not None:
            await self.settings.mcp.close()

    def start(self) -> None:
        self.delivery.start()
        self.stuck.start()
        self.scheduler.start()
        if self.schedules is not None:
            self.schedules.start()
        if self.media is not None:
            self.media.start()  # the retention sweep

    async def drain(self, turns_budget: float) -> bool:
        """Shutdown, first half: no answer can arrive now; let running turns finish within the budget."""
        if self.schedules is not None:
            await self.schedules.stop()  # no new firings while the turns drain
        await self.approvals.begin_shutdown()
        return await self.scheduler.drain(turns_budget)

    async def stop(self, close_budget: float, flush_budget: float) -> None:
        """Shutdown, second half: stop turns (unfinished ones go back to the queue), flush the outbox."""
        if self.schedules is not None:
            await self.schedules.stop()
        await self.scheduler.stop()
        await self.close_mcp()  # no turn calls a tool now; stdio servers are reaped
        await self.approvals.close(close_budget)
        await self.delivery.flush(flush_budget)
        await self.delivery.stop()
        await self.stuck.stop()
        await self.typist.aclose()
        if self.media is not None:
            await self.media.stop()
            self.media.close()


def build_engine(
    store: EngineStore,
    agent: Agent,
    settings: EngineSettings,
    metrics: GatewayMetrics | None = None,
    adapters: Mapping[str, Adapter] | None = None,
) -> Engine:
    engine = Engine(store, agent, metrics or GatewayMetrics(), settings)
    for adapter in (adapters or {}).values():
        engine.add_adapter(adapter)
    return engine
