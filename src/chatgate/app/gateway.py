"""The composition root: builds every part from the config and owns their lifetimes."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import socket
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chatgate import __version__
from chatgate.agents.base import Agent
from chatgate.agents.deferred import DeferredAgent
from chatgate.agents.tools.runner import ShellToolRunner
from chatgate.agents.tools.sandbox import BwrapSandbox, SandboxUnavailable
from chatgate.app.config import ConfigError, GatewayConfig
from chatgate.app.config.background import task_settings, webhooks_for
from chatgate.app.descriptors import DescriptorBudgetError, ensure_descriptors
from chatgate.app.fleet import CredentialHeld, FleetCredentials, FleetNotices, StandbyAdapter
from chatgate.app.locks import (
    FileLock,
    LockHeld,
    LockRecord,
    LockUnavailable,
    credential_lock,
    default_credential_dir,
    ensure_shared_dir,
)
from chatgate.app.logs import LAST_PROBLEM
from chatgate.app.netaddr import is_loopback, listen_tcp
from chatgate.app.platforms import Credential, build_platforms, platform_access
from chatgate.app.startup import CredentialInUse, StartupError, build_agent, build_store
from chatgate.app.startup_line import startup_line
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.session_key import IsolationPolicy, PolicyOverride
from chatgate.domain.shell.allow import load_allow
from chatgate.domain.shell.danger import load_rules
from chatgate.engine.approvals import ApprovalSettings
from chatgate.engine.delivery import DeliverySettings
from chatgate.engine.looplag import LoopLagMonitor
from chatgate.engine.metrics import GatewayMetrics
from chatgate.engine.pipeline import EngineSettings, build_engine
from chatgate.engine.scheduler import SchedulerSettings
from chatgate.engine.turn import TurnSettings
from chatgate.engine.webhooks import Webhooks
from chatgate.store.base import Store

if TYPE_CHECKING:
    from chatgate.app.http.server import HttpServer

log = logging.getLogger(__name__)


def bind_socket(host: str, port: int) -> socket.socket:
    try:
        return listen_tcp(host, port, backlog=512)
    except OSError as exc:
        raise StartupError(
            f"cannot listen on {host}:{port}: {exc.strerror}. Is another gateway running?"
            " Pick another port with --port or http.port."
        ) from exc


class Gateway:
    def __init__(
        self,
        config: GatewayConfig,
        state_dir: Path,
        *,
        store: Store | None = None,
        agent: Agent | None = None,
    ) -> None:
        self.config = config
        self.state_dir = state_dir
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.metrics = GatewayMetrics()
        self.store = store or build_store(config, state_dir, self.metrics)
        self.agent = agent or build_agent(config)
        self.engine = build_engine(self.store, self.agent, self._engine_settings(), self.metrics)
        self.adapters = self.engine.adapters
        self.intake = self.engine.intake
        self.delivery = self.engine.delivery
        self.scheduler = self.engine.scheduler
        self.approvals = self.engine.approvals
        built = build_platforms(config, self.engine, self.store)
        self.web = built.web_chat
        self._routes = built.routes
        self._preflight = built.preflight
        self._credentials = built.credentials
        self._credential_locks: list[FileLock] = []
        for adapter in built.adapters:
            self.engine.add_adapter(adapter)
        routes = webhooks_for(config.hooks, os.environ)
        self.hooks = (
            Webhooks(routes, self.store, self.engine.admission, self.engine.outbox_changed)
            if routes
            else None
        )
        self.lag = LoopLagMonitor(self.metrics)
        self.fleet = FleetNotices(self.engine, self.store)
        self.fleet.attach(self.store)  # a PostgreSQL fleet: the other processes' notices reach us
        self.fleet_credentials = FleetCredentials(self.store)
        self._started = time.monotonic()
        self._stopping = False
        self._server: HttpServer | None = None
        self._server_task: asyncio.Task[None] | None = None
        self._sock: socket.socket | None = None
        self._loop_handler: Any = None
        self.port: int | None = None

    def _engine_settings(self) -> EngineSettings:
        config = self.config
        sessions, tools = config.sessions, config.tools
        self.workdir = Path(tools.workdir) if tools.workdir else self.state_dir / "workdir"
        hide = (self.state_dir.absolute(),)  # its database and secrets, even above the work directory
        sandbox = (
            BwrapSandbox(self.workdir.absolute(), tools.sandbox_network, hide=hide)
            if tools.sandbox == "bwrap"
            else None
        )
        shell = (
            ShellToolRunner(
                self.workdir.absolute(), tools.timeout_seconds, tools.output_cap, sandbox, tools.env
            )
            if tools.enabled
            else None
        )
        return EngineSettings(
            owner=self.owner,
            access=platform_access(config),
            profile=config.profile,
            isolation=IsolationPolicy(sessions.group_sessions_per_user, sessions.thread_sessions_per_user),
            overrides={
                name: PolicyOverride(o.group_sessions_per_user, o.thread_sessions_per_user)
                for name, o in sessions.platforms.items()
            },
            turns=TurnSettings(
                history_limit=config.agent.history_limit,
                max_attempts=config.scheduler.max_turn_attempts,
                timeout_seconds=config.agent.turn_timeout_seconds,
                draft_interval=config.platforms.web.draft_interval_ms / 1000,
                silence_marker=config.agent.silence_marker,
            ),
            scheduler=SchedulerSettings(
                max_concurrent_turns=config.scheduler.max_concurrent_turns,
                lease_seconds=config.scheduler.lease_seconds,
                busy_policy=sessions.busy_policy,
            ),
            delivery=DeliverySettings(
                max_attempts=config.delivery.max_attempts,
                send_timeout=config.delivery.send_timeout_seconds,
                max_age=config.delivery.max_age_seconds,
            ),
            approvals=ApprovalSettings(
                timeout_s=config.approvals.timeout_seconds,
                approvers={name: frozenset(users) for name, users in config.approvals.approvers.items()},
                rules=load_rules(config.approvals.rules),
                allow=load_allow(config.approvals.allow),
            ),
            shell=shell,
            rate_limits={name: cfg.override() for name, cfg in config.delivery.rate_limits.items()},
            pairing=config.pairing.limits(),
            schedules=config.schedules.settings(),
            tasks=task_settings(config.background, config.delegation),
        )

    def _lock_credentials(self) -> None:
        """One process per bot token or relay identity, across state directories (blocking: in a thread)."""
        if not self._credentials or self.fleet_credentials.enabled:
            return  # a fleet's credentials are locked in its database, across hosts (app/fleet.py)
        configured = self.config.locks.credential_dir
        lock_dir = Path(configured) if configured else default_credential_dir()
        ensure_shared_dir(lock_dir)
        for credential in self._credentials:
            self._lock_credential(lock_dir, credential)

    def _lock_credential(self, lock_dir: Path, credential: Credential) -> None:
        kind, what = credential.kind, credential.what
        lock = credential_lock(lock_dir, kind, credential.value)
        try:
            lock.acquire(LockRecord.for_this_process(platform=kind, state_dir=str(self.state_dir)))
        except LockHeld as held:
            self._release_credentials()
            record = held.record
            who = f"pid {record.pid}" if record else "another process"
            where = record.extra.get("state_dir") if record else None
            raise CredentialInUse(
                f"{kind}: this {what} is already in use by {who}"
                + (f" (state dir {where})" if where else "")
                + f". One process per {what}: stop that gateway, or disable platforms.{kind} here."
            ) from None
        except LockUnavailable as exc:
            self._release_credentials()
            raise StartupError(f"{kind}: {exc}") from exc
        self._credential_locks.append(lock)

    def _release_credentials(self) -> None:
        for lock in self._credential_locks:
            lock.release()
        self._credential_locks.clear()

    async def ready(self) -> list[str]:
        """Why the gateway cannot serve right now (empty when it can)."""
        reasons = ["shutting down: new messages are not accepted"] if self._stopping else []
        try:
            await asyncio.wait_for(self.store.ping(), 3.0)
        except (StoreUnavailable, TimeoutError) as exc:
            reasons.append(f"store: {exc or 'no answer within 3s'}")
        self._refresh_gauges()
        for name, adapter in self.adapters.items():
            state = adapter.state()
            if not state.connected:
                reasons.append(f"{name}: not connected ({state.detail})")
        return reasons

    def _refresh_gauges(self) -> None:
        """Adapter states as gauges, read at each /metrics scrape and /readyz check."""
        for name, adapter in self.adapters.items():
            self.metrics.adapter_connected.labels(name).set(1 if adapter.state().connected else 0)

    async def status(self) -> dict[str, Any]:
        now = time.time()
        info: dict[str, Any] = {
            "running": True,
            "pid": os.getpid(),
            "version": __version__,
            "uptime_seconds": round(time.monotonic() - self._started, 1),
            "state_dir": str(self.state_dir),
            "http": f"{self.config.http.host}:{self.port}",
            "agent": self.agent.name,
            "adapters": {
                name: {"connected": a.state().connected, "detail": a.state().detail}
                for name, a in self.adapters.items()
            },
            "running_turns": self.scheduler.running(),
            "last_error": LAST_PROBLEM.last.message,
        }
        try:
            stats = await self.store.queue_stats()
            info["queue_depth"] = stats.depth
            info["oldest_queued_seconds"] = (
                round(now - stats.oldest_admitted_at, 1) if stats.oldest_admitted_at else None
            )
            info["last_session_error"] = stats.last_error
        except StoreUnavailable as exc:
            info["store_error"] = str(exc)
        return info

    async def start(self) -> None:
        self._started = time.monotonic()
        try:
            ensure_descriptors(self.config.http.max_connections)
        except DescriptorBudgetError as exc:
            raise StartupError(str(exc)) from None
        await asyncio.to_thread(self._lock_credentials)
        expired_prompts = await self.engine.open()
        for check in self._preflight:
            if (problem := await check()) is not None:
                raise ConfigError(problem)  # the caller stops what was started
        standby = await self._take_fleet_credentials()
        if self.engine.tools is not None:
            await asyncio.to_thread(self.workdir.mkdir, parents=True, exist_ok=True)
            await self._check_sandbox()
            log.info("the shell tool runs commands in %s", self.workdir)
        self.lag.start()
        self.engine.start()
        self._bind()
        for adapter in self.adapters.values():
            # after the store is open: intake commits every event before its ack
            if adapter.platform in standby and isinstance(adapter, StandbyAdapter):
                await adapter.start_sending()  # another process of the fleet polls
            else:
                await adapter.start()
        await self._start_http()  # its imports run in a thread while the platforms make their first calls
        self.fleet_credentials.start()
        await self.fleet_credentials.announce(self.adapters)
        if isinstance(self.agent, DeferredAgent):
            self.agent.warm()  # after the adapters: their first poll does not wait for an SDK import
        self.approvals.render_all(expired_prompts)
        log.info(startup_line(self.config, self.state_dir, self.adapters))

    async def _take_fleet_credentials(self) -> set[str]:
        credentials = [(c.kind, c.value, c.what) for c in self._credentials]
        try:
            return await self.fleet_credentials.take(credentials, dict(self.adapters))
        except CredentialHeld as exc:
            raise CredentialInUse(str(exc)) from None

    async def _check_sandbox(self) -> None:
        """A configured sandbox must work now: never run commands unsandboxed by surprise."""
        shell = self.engine.tools.shell if self.engine.tools is not None else None
        if shell is None or shell.sandbox is None:
            return
        try:
            await asyncio.to_thread(shell.sandbox.check)
        except SandboxUnavailable as exc:
            raise ConfigError(str(exc)) from exc
        log.info(
            "the shell tool runs commands inside bubblewrap (network: %s)", self.config.tools.sandbox_network
        )

    def _bind(self) -> None:
        """The HTTP socket, before any platform starts: a port in use fails the start at once."""
        self._sock = bind_socket(self.config.http.host, self.config.http.port)
        self.port = self._sock.getsockname()[1]

    async def _start_http(self) -> None:
        # uvicorn, starlette and the web chat: imported off the loop, so a poll already
        # started goes on meanwhile (the modules are then cached for the imports below).
        await asyncio.to_thread(importlib.import_module, "chatgate.app.http.server")
        from chatgate.app.http.app import build_app
        from chatgate.app.http.guard import AcceptErrorThrottle
        from chatgate.app.http.server import http_server

        http = self.config.http
        loop = asyncio.get_running_loop()
        self._loop_handler = loop.get_exception_handler()
        loop.set_exception_handler(AcceptErrorThrottle())
        app = build_app(
            self.store,
            self.metrics,
            self.web,
            ready=self.ready,
            status=self.status,
            allowed_origins=frozenset(o.rstrip("/") for o in self.config.platforms.web.allowed_origins),
            loopback_bind=is_loopback(http.host),
            refresh_gauges=self._refresh_gauges,
            routes=self._routes,
            hooks=self.hooks,
        )
        assert self._sock is not None
        self._server = http_server(app, http)
        self._server_task = asyncio.create_task(
            self._server.serve(sockets=[self._sock]), name="chatgate-http"
        )
        while not self._server.started:
            if self._server_task.done():
                await self._server_task
                raise StartupError("the HTTP server stopped during start-up; see the log above")
            await asyncio.sleep(0.01)
        log.info("chatgate listening on http://%s:%d/", http.host, self.port)

    async def stop(self) -> None:
        """Stop intake, let turns finish within the budget, flush the outbox, close.

        Whatever does not fit in a budget stays in the store for the next start:
        unfinished turns are queued again, undelivered replies stay pending.
        """
        budget = self.config.shutdown
        self._stopping = True
        await self.fleet_credentials.close()  # a standby takes nothing over while this one stops
        for adapter in self.adapters.values():
            adapter.stop_intake()
        if not await self.engine.drain(
            budget.drain_seconds
        ):  # no answer can arrive now: re-ask after restart
            log.warning(
                "turns still running after %.0fs; they go back to the queue for the next start",
                budget.drain_seconds,
            )
        await self.engine.stop(budget.adapter_close_seconds, budget.outbox_flush_seconds)
        await self._stop_http(budget.adapter_close_seconds)
        for adapter in self.adapters.values():
            await adapter.aclose(budget.adapter_close_seconds)
        await self.agent.aclose()
        await self.lag.stop()
        await self.fleet.close()
        await self.store.close()
        self._release_credentials()
        log.info("chatgate stopped")

    async def _stop_http(self, timeout: float) -> None:
        if self._server is None or self._server_task is None:
            if self._sock is not None:
                self._sock.close()  # bound, but a start that failed before serving never used it
            return
        self._server.should_exit = True
        done, _ = await asyncio.wait({self._server_task}, timeout=timeout)
        if not done:
            self._server.force_exit = True
            await asyncio.gather(self._server_task, return_exceptions=True)
        self._server_task = None
        asyncio.get_running_loop().set_exception_handler(self._loop_handler)
