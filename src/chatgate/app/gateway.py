"""The composition root: builds every part from the config and owns their lifetimes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn

from chatgate import __version__
from chatgate.agents.base import Agent
from chatgate.agents.echo import EchoAgent
from chatgate.agents.tools.runner import ShellToolRunner
from chatgate.app.config import ConfigError, GatewayConfig, RelayConfig, TelegramConfig, secret
from chatgate.app.http import build_app
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
from chatgate.domain.commands import CONTROL_COMMANDS
from chatgate.domain.danger import load_rules
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.session_key import IsolationPolicy, PolicyOverride
from chatgate.engine.admission import Admission
from chatgate.engine.approvals import ApprovalBroker, ApprovalSettings, ShellTools
from chatgate.engine.authz import Authorizer, PlatformAccess
from chatgate.engine.delivery import DeliverySettings, DeliveryWorker
from chatgate.engine.intake import EngineIntake
from chatgate.engine.looplag import LoopLagMonitor
from chatgate.engine.metrics import GatewayMetrics
from chatgate.engine.ports import Adapter
from chatgate.engine.ratelimit import PlatformLimits, RateBudget
from chatgate.engine.scheduler import Scheduler, SchedulerSettings
from chatgate.engine.turn import TurnRunner, TurnSettings
from chatgate.platforms.webchat.adapter import WebChatAdapter
from chatgate.store.base import Store
from chatgate.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from chatgate.platforms.relay.adapter import RelayHub
    from chatgate.platforms.telegram.adapter import TelegramAdapter

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the gateway owns shutdown."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class StartupError(Exception):
    """The gateway cannot start; the message says what to do."""


class CredentialInUse(StartupError):
    """Another process holds a platform credential this gateway would use (one process per credential)."""


def build_agent(config: GatewayConfig) -> Agent:
    if config.agent.kind == "openai":
        from chatgate.agents.openai_agent import OpenAIAgent

        oa = config.agent.openai
        return OpenAIAgent(
            base_url=oa.base_url,
            model=oa.model,
            api_key=os.environ.get(oa.api_key_env, ""),
            temperature=oa.temperature,
            max_tokens=oa.max_tokens,
            timeout_s=oa.timeout_seconds,
        )
    return EchoAgent(
        chunk_delay_ms=config.agent.echo.chunk_delay_ms, chunk_chars=config.agent.echo.chunk_chars
    )


def build_store(config: GatewayConfig, state_dir: Path, metrics: GatewayMetrics) -> Store:
    sq = config.store.sqlite
    return SqliteStore(
        Path(sq.path) if sq.path else state_dir / "chatgate.db",
        synchronous=sq.synchronous,
        group_commit=sq.group_commit,
        on_commit=metrics.observe_commit,
    )


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
        self.adapters: dict[str, Adapter] = {}
        sessions = config.sessions
        web_cfg = config.platforms.web
        rules: dict[str, PlatformAccess] = {}
        if web_cfg.enabled:
            allow_all = web_cfg.allow_all if web_cfg.allow_all is not None else is_loopback(config.http.host)
            rules["web"] = PlatformAccess(allow_all=allow_all, allow_users=frozenset(web_cfg.allow_users))
        tg_cfg = config.platforms.telegram
        if tg_cfg.enabled:
            rules["telegram"] = PlatformAccess(allow_users=frozenset(tg_cfg.allow_users))
        relay_cfg = config.platforms.relay
        if relay_cfg.enabled:
            for fronted in relay_cfg.platforms:
                rules[fronted.platform.strip().lower()] = PlatformAccess(
                    allow_all=fronted.allow_all, allow_users=frozenset(fronted.allow_users)
                )
        self.budget = RateBudget()
        self.delivery = DeliveryWorker(
            self.store,
            self.adapters,
            self.metrics,
            DeliverySettings(
                max_attempts=config.delivery.max_attempts,
                send_timeout=config.delivery.send_timeout_seconds,
                max_age=config.delivery.max_age_seconds,
            ),
            self.budget,
        )
        self.approvals = ApprovalBroker(
            self.store,
            self.adapters,
            ApprovalSettings(
                timeout_s=config.approvals.timeout_seconds,
                approvers={name: frozenset(users) for name, users in config.approvals.approvers.items()},
                rules=load_rules(config.approvals.rules),
            ),
            on_outbox=self.delivery.wake,
            stop_session=self._stop_session,
        )
        tools_cfg = config.tools
        self.workdir = Path(tools_cfg.workdir) if tools_cfg.workdir else state_dir / "workdir"
        self.tools: ShellTools | None = None
        if tools_cfg.enabled:
            shell = ShellToolRunner(self.workdir.absolute(), tools_cfg.timeout_seconds, tools_cfg.output_cap)
            self.tools = ShellTools(self.approvals, shell)
        self.admission = Admission(
            self.store,
            Authorizer(rules),
            self.metrics,
            profile=config.profile,
            isolation=IsolationPolicy(sessions.group_sessions_per_user, sessions.thread_sessions_per_user),
            overrides={
                name: PolicyOverride(o.group_sessions_per_user, o.thread_sessions_per_user)
                for name, o in sessions.platforms.items()
            },
            on_queued=self._on_queued,
            on_reply=self.delivery.wake,
            stop_session=self._stop_session,
            approvals=self.approvals,
        )
        self.intake = EngineIntake(self.admission, self.store, self.metrics)
        self.runner = TurnRunner(
            self.store,
            self.agent,
            self.adapters,
            self.admission.policy_for,
            TurnSettings(
                history_limit=config.agent.history_limit,
                max_attempts=config.scheduler.max_turn_attempts,
                timeout_seconds=config.agent.turn_timeout_seconds,
                draft_interval=web_cfg.draft_interval_ms / 1000,
                silence_marker=config.agent.silence_marker,
            ),
            self.budget,
            on_preview=lambda platform, op: self.metrics.preview_updates.labels(platform, op).inc(),
            tools=self.tools.for_turn if self.tools is not None else None,
        )
        self.scheduler = Scheduler(
            self.store,
            self.runner,
            self.metrics,
            self.owner,
            SchedulerSettings(
                max_concurrent_turns=config.scheduler.max_concurrent_turns,
                lease_seconds=config.scheduler.lease_seconds,
                busy_policy=sessions.busy_policy,
            ),
            on_committed=self.delivery.wake,
        )
        self.web: WebChatAdapter | None = None
        if web_cfg.enabled:
            self.web = WebChatAdapter(
                self.store,
                self.intake,
                max_text_chars=web_cfg.max_text_chars,
                access_token=secret(os.environ, web_cfg.access_token_env),
            )
            self.add_adapter(self.web)
        self.telegram: TelegramAdapter | None = None
        self._credentials: list[tuple[str, str]] = []
        self._credential_locks: list[FileLock] = []
        if tg_cfg.enabled:
            self.telegram = self._build_telegram(tg_cfg)
            self.add_adapter(self.telegram)
        self.relay: RelayHub | None = None
        if relay_cfg.enabled:
            self.relay = self._build_relay(relay_cfg)
            for fronted_adapter in self.relay.platforms.values():
                self.add_adapter(fronted_adapter)
        self.lag = LoopLagMonitor(self.metrics)
        self._started = time.monotonic()
        self._stopping = False
        self._server: _Server | None = None
        self._server_task: asyncio.Task[None] | None = None
        self._sock: socket.socket | None = None
        self.port: int | None = None

    def _build_telegram(self, cfg: TelegramConfig) -> TelegramAdapter:
        from chatgate.platforms.telegram.adapter import TelegramAdapter, TelegramSettings  # imports aiogram

        token = secret(os.environ, cfg.token_env)
        if not token:
            raise ConfigError(
                f"platforms.telegram.token_env: environment variable {cfg.token_env or '(unset)'} is not"
                " set; export it with the token from @BotFather"
            )
        settings = TelegramSettings(
            token=token,
            api_base=cfg.api_base,
            poll_timeout=cfg.poll_timeout_seconds,
            drop_pending_updates=cfg.drop_pending_updates,
            duplicate_marker=self.config.delivery.duplicate_marker,
        )
        try:
            adapter = TelegramAdapter(settings, self.store, self.intake)
        except ValueError as exc:
            raise ConfigError(f"platforms.telegram.token_env: {exc}") from exc
        self._credentials.append(("telegram", token))
        return adapter

    def _build_relay(self, cfg: RelayConfig) -> RelayHub:
        from chatgate.platforms.relay.adapter import RelayHub
        from chatgate.platforms.relay.connection import RelaySettings, dial_url

        assert cfg.url and cfg.gateway_id
        relay_secret = secret(os.environ, cfg.secret_env)
        if not relay_secret:
            raise ConfigError(f"platforms.relay.secret_env: environment variable {cfg.secret_env} is not set")
        settings = RelaySettings(
            url=cfg.url,
            gateway_id=cfg.gateway_id,
            secret=relay_secret,
            identities=tuple((p.platform.strip().lower(), p.bot_id) for p in cfg.platforms),
            outbound_timeout=cfg.outbound_timeout_seconds,
            handshake_timeout=cfg.handshake_timeout_seconds,
            reconnect_initial=cfg.reconnect_initial_seconds,
            reconnect_max=cfg.reconnect_max_seconds,
            going_idle_timeout=cfg.going_idle_timeout_seconds,
            token_ttl=cfg.token_ttl_seconds,
            # The connector keeps Discord's registered slash commands in step with what we answer.
            command_manifest=tuple({"name": c.name, "description": c.summary} for c in CONTROL_COMMANDS),
        )
        # Keyed by the normalized dial target: http://h and ws://h/relay are the same relay identity.
        self._credentials.append(("relay", f"{dial_url(settings.url)}|{settings.gateway_id}"))
        return RelayHub(
            settings,
            self.intake,
            stop_session=lambda key: self.admission.interrupt(key, "relay interrupt"),
            duplicate_marker=self.config.delivery.duplicate_marker,
            on_rejected=lambda reason: self.metrics.refused.labels("relay", "rejected_frame").inc(),
        )

    def _lock_credentials(self) -> None:
        """One process per bot token or relay identity, across state directories (blocking: in a thread)."""
        if not self._credentials:
            return
        configured = self.config.locks.credential_dir
        lock_dir = Path(configured) if configured else default_credential_dir()
        ensure_shared_dir(lock_dir)
        for kind, credential in self._credentials:
            self._lock_credential(lock_dir, kind, credential)

    def _lock_credential(self, lock_dir: Path, kind: str, credential: str) -> None:
        what = "bot token" if kind == "telegram" else "relay gateway id"
        lock = credential_lock(lock_dir, kind, credential)
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

    def add_adapter(self, adapter: Adapter) -> None:
        """Register a platform: its rate limits join the shared budget."""
        caps = adapter.capabilities
        self.budget.configure(
            adapter.platform, PlatformLimits(caps.chat_min_interval, caps.platform_max_rate)
        )
        self.adapters[adapter.platform] = adapter

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

    def _on_queued(self, key: str) -> None:
        self.scheduler.on_queued(key)

    async def _stop_session(self, key: str) -> None:
        await self.scheduler.stop_session(key)

    async def start(self) -> None:
        self._started = time.monotonic()
        await asyncio.to_thread(self._lock_credentials)
        await self.store.open()
        released = await self.store.recover(self.owner)
        if released:
            log.warning("resuming %d session(s) a previous gateway left unfinished", released)
        # Before any turn runs: a prompt left open by the old process has no one waiting on it.
        expired_prompts = await self.approvals.recover()
        if self.tools is not None:
            await asyncio.to_thread(self.workdir.mkdir, parents=True, exist_ok=True)
            log.info("the shell tool runs commands in %s", self.workdir)
        self.lag.start()
        self.delivery.start()
        self.scheduler.start()
        await self._start_http()
        if self.telegram is not None:
            self.telegram.start()  # after the store is open: polling commits every update before the offset
        if self.relay is not None:
            self.relay.start()
        self.approvals.render_all(expired_prompts)

    async def _start_http(self) -> None:
        http = self.config.http
        self._sock = bind_socket(http.host, http.port)
        self.port = self._sock.getsockname()[1]
        app = build_app(
            self.store,
            self.metrics,
            self.web,
            ready=self.ready,
            status=self.status,
            allowed_origins=frozenset(o.rstrip("/") for o in self.config.platforms.web.allowed_origins),
            loopback_bind=is_loopback(http.host),
            refresh_gauges=self._refresh_gauges,
        )
        uv_config = uvicorn.Config(
            app, log_config=None, lifespan="off", ws_max_size=4 * 1024 * 1024, ws_ping_interval=20.0
        )
        self._server = _Server(uv_config)
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
        for adapter in self.adapters.values():
            adapter.stop_intake()
        await self.approvals.begin_shutdown()  # no answer can arrive now: re-ask after the restart
        if not await self.scheduler.drain(budget.drain_seconds):
            log.warning(
                "turns still running after %.0fs; they go back to the queue for the next start",
                budget.drain_seconds,
            )
        await self.scheduler.stop()
        await self.approvals.close(budget.adapter_close_seconds)
        await self.delivery.flush(budget.outbox_flush_seconds)
        await self.delivery.stop()
        await self._stop_http(budget.adapter_close_seconds)
        if self.telegram is not None:
            await self.telegram.close(budget.adapter_close_seconds)
        if self.relay is not None:
            await self.relay.close(budget.adapter_close_seconds)
        await self.agent.aclose()
        await self.lag.stop()
        await self.store.close()
        self._release_credentials()
        log.info("chatgate stopped")

    async def _stop_http(self, timeout: float) -> None:
        if self._server is None or self._server_task is None:
            return
        self._server.should_exit = True
        done, _ = await asyncio.wait({self._server_task}, timeout=timeout)
        if not done:
            self._server.force_exit = True
            await asyncio.gather(self._server_task, return_exceptions=True)
        self._server_task = None
