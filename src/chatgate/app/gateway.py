"""The composition root: builds every part from the config and owns their lifetimes."""

from __future__ import annotations

import asyncio
import functools
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
from chatgate.agents.tools.sandbox import SandboxUnavailable
from chatgate.app.config import ConfigError, GatewayConfig
from chatgate.app.config.background import webhooks_for
from chatgate.app.descriptors import DescriptorBudgetError, ensure_descriptors
from chatgate.app.engine_settings import engine_settings
from chatgate.app.fleet import CredentialHeld, FleetCredentials, FleetNotices, StandbyAdapter
from chatgate.app.http.on_demand import StartOnFirstConnection, import_http_stack
from chatgate.app.lifetime import Lifetime
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
from chatgate.app.platforms import build_platforms
from chatgate.app.startup import AddressInUse, CredentialInUse, StartupError, build_agent, build_store
from chatgate.app.startup_line import endpoint_warning, model_endpoint_problem, startup_line
from chatgate.domain.errors import StoreUnavailable
from chatgate.engine.looplag import LoopLagMonitor
from chatgate.engine.metrics import GatewayMetrics
from chatgate.engine.pipeline import build_engine
from chatgate.engine.webhooks import Webhooks
from chatgate.platforms.kit.plugin import Credential
from chatgate.store.base import Store

if TYPE_CHECKING:
    from chatgate.app.http.server import HttpServer

log = logging.getLogger(__name__)
_UNSET = object()


def bind_socket(host: str, port: int) -> socket.socket:
    try:
        return listen_tcp(host, port, backlog=512)
    except OSError as exc:
        raise AddressInUse(
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
        tools = config.tools
        self.workdir = Path(tools.workdir) if tools.workdir else state_dir / "workdir"
        settings = engine_settings(config, self.owner, self.workdir, state_dir)
        self.engine = build_engine(self.store, self.agent, settings, self.metrics)
        self.adapters = self.engine.adapters
        self.intake = self.engine.intake
        self.delivery = self.engine.delivery
        self.scheduler = self.engine.scheduler
        self.approvals = self.engine.approvals
        built = build_platforms(config, self.engine, self.store)
        self._routes = built.routes
        self.serves_page = any(getattr(route, "path", None) == "/" for route in built.routes)
        """Whether a platform serves a page at ``/`` (the start line offers it only then)."""
        self._allowed_origins = built.allowed_origins
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
        self._lifetime = Lifetime()
        self._server: HttpServer | None = None
        self._server_task: asyncio.Task[None] | None = None
        self._on_demand: StartOnFirstConnection | None = None
        self._sock: socket.socket | None = None
        self._loop_handler: Any = _UNSET
        self.port: int | None = None

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
        if self.engine.settings.mcp is not None:
            info["mcp_servers"] = self.engine.settings.mcp.status()
        try:
            stats = await self.store.queue_stats()
            info["queue_depth"] = stats.depth
            info["oldest_queued_seconds"] = (
                round(now - stats.oldest_admitted_at, 1) if stats.oldest_admitted_at else None
            )
            info["last_session_error"] = stats.last_error
            backlog = await self.engine.stuck.check()
            info["undelivered_replies"] = backlog.count
            info["oldest_undelivered_seconds"] = (
                round(now - backlog.oldest_created_at, 1) if backlog.oldest_created_at else None
            )
            info["stuck_replies"] = [reply.describe(now) for reply in backlog.stuck]
        except StoreUnavailable as exc:
            info["store_error"] = str(exc)
        return info

    async def start(self) -> None:
        """Start every part in order; a failure closes what had started (newest first) and raises."""
        self._started = time.monotonic()
        try:
            await self._start(self._lifetime)
        except BaseException:
            await self._lifetime.aclose()
            raise
        line = startup_line(self.config, self.state_dir, self.adapters)
        problem = await model_endpoint_problem(self.config)
        if problem is None:
            log.info(line)
        else:
            log.warning(line + endpoint_warning(self.config, problem))

    async def _start(self, life: Lifetime) -> None:
        try:
            ensure_descriptors(self.config.http.max_connections)
        except DescriptorBudgetError as exc:
            raise StartupError(str(exc)) from None
        await asyncio.to_thread(self._lock_credentials)
        life.opened("credential locks", self._release_credentials_off_loop)
        expired_prompts = await self.engine.open()  # the store, and what a previous process left
        life.opened("store", self.store.close)
        life.opened("MCP servers", self.engine.close_mcp)
        life.opened("fleet notices", self.fleet.close)
        for check in self._preflight:
            if (problem := await check()) is not None:
                raise ConfigError(problem)
        standby = await self._take_fleet_credentials()
        if self.engine.tools is not None:
            await asyncio.to_thread(self.workdir.mkdir, parents=True, exist_ok=True)
            await self._check_sandbox()
            log.info("the shell tool runs commands in %s", self.workdir)
        life.opened("agent", self.agent.aclose)
        self.lag.start()
        life.opened("loop lag monitor", self.lag.stop)
        self._bind()  # a port in use fails the start before any platform connects
        life.opened("HTTP socket", self._close_socket)
        http_imports = None
        if self._routes or self.hooks is not None:
            # uvicorn, starlette and the pages: imported in a thread while the platforms make
            # their first calls, so a restart's first poll does not wait for them.
            http_imports = asyncio.ensure_future(asyncio.to_thread(import_http_stack))
            life.opened("HTTP imports", lambda: asyncio.gather(http_imports, return_exceptions=True))
        close_budget = self.config.shutdown.adapter_close_seconds
        for name, adapter in self.adapters.items():
            # Before its start: ``aclose`` also undoes a start that raised part-way.
            life.opened(f"{name} adapter", functools.partial(adapter.aclose, close_budget))
            # after the store is open: intake commits every event before its ack
            if adapter.platform in standby and isinstance(adapter, StandbyAdapter):
                await adapter.start_sending()  # another process of the fleet polls
            else:
                await adapter.start()
        life.opened("HTTP server", self._stop_http)
        await self._serve_http(http_imports)
        self.engine.start()
        life.opened("engine", self._stop_engine)
        self.fleet_credentials.start()
        life.opened("fleet credentials", self.fleet_credentials.close)  # no takeover while this one stops
        await self.fleet_credentials.announce(self.adapters)
        life.opened("intake", self._stop_intake)  # the first to go: nothing new is acknowledged
        if isinstance(self.agent, DeferredAgent):
            self.agent.warm()  # after the adapters: their first poll does not wait for the agent's imports
        self.approvals.render_all(expired_prompts)

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

    async def _serve_http(self, imports: asyncio.Future[Any] | None) -> None:
        """Serve now, or from the first connection on (no platform route nor webhook: ``on_demand``)."""
        if imports is not None:
            await imports
            await self._start_http()
            return
        assert self._sock is not None
        self._on_demand = StartOnFirstConnection(self._sock, self._start_http_on_demand)
        self._on_demand.arm()
        http = self.config.http
        log.info("chatgate listening on http://%s:%d/ (serving from the first request)", http.host, self.port)

    async def _start_http_on_demand(self) -> None:
        await asyncio.to_thread(import_http_stack)
        await self._start_http(announce=False)

    async def _start_http(self, announce: bool = True) -> None:
        from chatgate.app.http.app import build_app  # imported in a thread already (``import_http_stack``)
        from chatgate.app.http.guard import AcceptErrorThrottle
        from chatgate.app.http.server import has_websockets, http_server

        http = self.config.http
        loop = asyncio.get_running_loop()
        self._loop_handler = loop.get_exception_handler()
        loop.set_exception_handler(AcceptErrorThrottle())
        app = build_app(
            self.store,
            self.metrics,
            ready=self.ready,
            status=self.status,
            allowed_origins=self._allowed_origins,
            loopback_bind=is_loopback(http.host),
            refresh_gauges=self._refresh_gauges,
            routes=self._routes,
            hooks=self.hooks,
        )
        assert self._sock is not None
        self._server = http_server(app, http, websockets=has_websockets(self._routes))
        self._server_task = asyncio.create_task(
            self._server.serve(sockets=[self._sock]), name="chatgate-http"
        )
        while not self._server.started:
            if self._server_task.done():
                await self._server_task
                raise StartupError("the HTTP server stopped during start-up; see the log above")
            await asyncio.sleep(0.01)
        if announce:
            log.info("chatgate listening on http://%s:%d/", http.host, self.port)

    async def stop(self) -> None:
        """Stop intake, let turns finish within the budget, flush the outbox, close: the start in reverse.

        Whatever does not fit in a budget stays in the store for the next start:
        unfinished turns are queued again, undelivered replies stay pending.
        """
        self._stopping = True
        await self._lifetime.aclose()
        log.info("chatgate stopped")

    async def _stop_intake(self) -> None:
        self._stopping = True
        for adapter in self.adapters.values():
            adapter.stop_intake()

    async def _stop_engine(self) -> None:
        budget = self.config.shutdown
        if not await self.engine.drain(
            budget.drain_seconds
        ):  # no answer can arrive now: re-ask after restart
            log.warning(
                "turns still running after %.0fs; they go back to the queue for the next start",
                budget.drain_seconds,
            )
        await self.engine.stop(budget.adapter_close_seconds, budget.outbox_flush_seconds)

    async def _release_credentials_off_loop(self) -> None:
        await asyncio.to_thread(self._release_credentials)

    async def _close_socket(self) -> None:
        if self._sock is not None and (self._server is None or not self._server.started):
            self._sock.close()  # bound, but never served (uvicorn closes the socket it served)
        self._sock = None

    async def _stop_http(self) -> None:
        timeout = self.config.shutdown.adapter_close_seconds
        if self._on_demand is not None:
            await self._on_demand.aclose()  # no start from now on (one under way is cancelled)
            if self._server is None:
                await self._close_socket()  # refused from now on, not queued until the end
        if self._server is not None and self._server_task is not None:
            self._server.request_exit()
            done, _ = await asyncio.wait({self._server_task}, timeout=timeout)
            if not done:
                self._server.force_exit = True
                await asyncio.gather(self._server_task, return_exceptions=True)
            self._server_task = None
        if self._loop_handler is not _UNSET:
            asyncio.get_running_loop().set_exception_handler(self._loop_handler)
            self._loop_handler = _UNSET
