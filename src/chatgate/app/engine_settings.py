"""The config read as the engine's settings: one place that turns sections into stage settings."""

from __future__ import annotations

import os
from pathlib import Path

from chatgate.agents.tools.mcp_hub import McpHub
from chatgate.agents.tools.runner import ShellToolRunner
from chatgate.agents.tools.sandbox import BwrapSandbox
from chatgate.app.config import GatewayConfig
from chatgate.app.config.background import task_settings
from chatgate.app.config.mcp import mcp_servers
from chatgate.app.platforms import platform_access
from chatgate.domain.errors import StartupError
from chatgate.domain.persona import Personas
from chatgate.domain.session_key import IsolationPolicy, PolicyOverride
from chatgate.domain.shell.allow import load_allow
from chatgate.domain.shell.danger import load_rules
from chatgate.engine.approvals import ApprovalSettings
from chatgate.engine.delivery import DeliverySettings
from chatgate.engine.pipeline import AttachLimits, EngineSettings, MediaSettings
from chatgate.engine.scheduling import SchedulerSettings
from chatgate.engine.turn import TurnSettings


def engine_settings(config: GatewayConfig, owner: str, workdir: Path, state_dir: Path) -> EngineSettings:
    """Every stage's settings from the config; the shell tool runs in ``workdir``."""
    sessions, tools = config.sessions, config.tools
    hide = (state_dir.absolute(),)  # its database and secrets, even above the work directory
    sandbox = (
        BwrapSandbox(workdir.absolute(), tools.sandbox_network, hide=hide)
        if tools.sandbox == "bwrap"
        else None
    )
    shell = (
        ShellToolRunner(workdir.absolute(), tools.timeout_seconds, tools.output_cap, sandbox, tools.env)
        if tools.enabled
        else None
    )
    return EngineSettings(
        owner=owner,
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
            silence_marker=config.agent.silence_marker,
            personas=personas(config),
            profiles=config.agent.model_profiles(),
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
        mcp=McpHub(servers) if (servers := mcp_servers(config.agent.mcp, os.environ)) else None,
        rate_limits={name: cfg.override() for name, cfg in config.delivery.rate_limits.items()},
        pairing=config.pairing.limits(),
        schedules=config.schedules.settings(),
        tasks=task_settings(config.background, config.delegation),
        media=MediaSettings(config.media.limits(), state_dir / "blobs" / "tmp")
        if config.media.enabled
        else None,
        attach=AttachLimits(tools.attach_max_bytes, state_dir / "blobs" / "tmp")
        if tools.enabled and tools.attach_files
        else None,
    )


def media_settings(config: GatewayConfig, state_dir: Path) -> MediaSettings | None:
    """The fetch step's bounds; downloads stream into the blob store's directory (taken in by a rename)."""
    if not config.media.enabled:
        return None
    return MediaSettings(config.media.limits(), state_dir / "blobs" / "tmp")


def personas(config: GatewayConfig) -> Personas:
    """The persona from the config, read from ``agent.system_prompt_file`` when one is named."""
    agent = config.agent
    default = agent.system_prompt
    if agent.system_prompt_file:
        path = Path(agent.system_prompt_file).expanduser()
        try:
            default = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise StartupError(f"agent.system_prompt_file: cannot read {path}: {exc}") from None
    return Personas(default, dict(agent.system_prompts))
