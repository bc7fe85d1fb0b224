"""Configuration: one YAML file plus ``CHATGATE_*`` environment overrides.

Validated with pydantic at start-up so a mistake is reported with the offending
key before anything connects. Secrets are never in the YAML: the file names the
environment variable that holds each one.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from chatgate.agents.tools.env import check_names
from chatgate.app.config.background import (
    BackgroundConfig,
    DelegationConfig,
    HooksConfig,
    SchedulesConfig,
)
from chatgate.app.config.mcp import McpConfig
from chatgate.app.config.media import MediaConfig
from chatgate.app.config.pairing import PairingConfig
from chatgate.app.config.platforms import PlatformSections
from chatgate.app.config.rates import RateLimitsConfig
from chatgate.domain.errors import ConfigError as ConfigError
from chatgate.domain.profiles import DEFAULT_PROFILE, PROFILE_NAME, ModelProfile, Profiles
from chatgate.domain.shell.allow import load_allow
from chatgate.domain.shell.danger import load_rules
from chatgate.platforms.kit.section import EnvName, fold_literal_case
from chatgate.platforms.kit.section import Section as _Section


class HttpConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    max_connections: int = Field(1000, ge=1, le=1_000_000)
    """Open HTTP and WebSocket connections; the process needs this many descriptors plus 128."""
    header_timeout_seconds: float = Field(10.0, gt=0, le=3600)
    """How long a connection may take to send a request's headers (slowloris guard)."""
    keep_alive_seconds: int = Field(5, ge=1, le=3600)
    """How long an idle HTTP keep-alive connection stays open between requests."""
    max_unauthenticated: int = Field(256, ge=1, le=1_000_000)
    """Connections at once whose client has not proved who it is (no hello with the right token,
    no session cookie, no API key, no signed delivery yet; health probes too). Past it, a new
    one takes the place of the oldest that is only waiting (for headers, a body, a hello), so
    strangers cannot take the places of users, API clients and probes."""
    max_unauthenticated_per_address: int = Field(32, ge=1, le=1_000_000)
    """How many of those one client address may hold (a proxy in ``trusted_proxies``: no cap);
    its next one takes the place of its own oldest waiting one."""
    auth_timeout_seconds: float = Field(10.0, gt=0, le=3600)
    """How long a web chat WebSocket may take to send an accepted hello before it is closed (4408)."""
    body_timeout_seconds: float = Field(5.0, gt=0, le=3600)
    """How long a request body may take before ``min_body_bytes_per_second`` applies to it."""
    min_body_bytes_per_second: float = Field(1024.0, gt=0, le=1e9)
    """The slowest a request body may arrive, on average, once ``body_timeout_seconds`` have
    passed since its headers; a slower one is answered 408 and closed (every route that reads a
    body: webhooks, Slack events, the API, sign-in)."""
    trusted_proxies: list[str] = []
    """Addresses or networks (``10.0.0.5``, ``10.0.0.0/8``, ``::1``) of reverse proxies whose
    ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed. From anyone else those headers
    are ignored: a client could name any address and get a fresh sign-in budget, or claim https."""

    @model_validator(mode="after")
    def _budgets_fit(self) -> HttpConfig:
        if "max_unauthenticated" not in self.model_fields_set:
            self.max_unauthenticated = min(self.max_unauthenticated, self.max_connections)
        elif self.max_unauthenticated > self.max_connections:
            raise ValueError(
                f"http.max_unauthenticated ({self.max_unauthenticated}) must be at most"
                f" http.max_connections ({self.max_connections})"
            )
        return self

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, values: list[str]) -> list[str]:
        for value in values:
            try:
                ipaddress.ip_network(value.strip(), strict=False)
            except ValueError:
                raise ValueError(f"{value!r} is not an IP address or network (10.0.0.0/8, ::1)") from None
        return [str(ipaddress.ip_network(v.strip(), strict=False)) for v in values]


class SqliteConfig(_Section):
    path: str | None = None
    """Defaults to ``<state_dir>/chatgate.db``."""
    synchronous: Literal["OFF", "NORMAL", "FULL", "EXTRA"] = "FULL"
    group_commit: bool = True


class PostgresConfig(_Section):
    schema_: str = Field("public", alias="schema", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    """The schema the fleet's tables live in (created if missing); one fleet per schema."""
    pool_size: int = Field(10, ge=1, le=200)
    """Connections each process keeps open (plus one for its liveness lock)."""
    connect_timeout_seconds: float = Field(5.0, gt=0, le=300)
    outbox_lease_seconds: float = Field(300.0, gt=0, le=86_400)
    """How long a message being sent stays claimed before another process may resend it
    (a process that died is noticed at once by the next start; this bounds the rest)."""


class StoreConfig(_Section):
    backend: Literal["sqlite", "postgres"] = "sqlite"
    """``postgres`` when ``url`` is set (setting ``url`` is enough)."""
    url: str | None = None
    """``postgresql://user@host:port/database``: a fleet of gateways shares it. No password here."""
    password_env: EnvName | None = None
    """The environment variable holding the PostgreSQL password (never in the YAML)."""
    sqlite: SqliteConfig = SqliteConfig()
    postgres: PostgresConfig = PostgresConfig()

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, url: str | None) -> str | None:
        return None if url is None else postgres_url_problem(url)

    @model_validator(mode="after")
    def _backend_follows_url(self) -> StoreConfig:
        if self.url is not None and "backend" not in self.model_fields_set:
            self.backend = "postgres"
        if self.url is None and self.backend == "postgres":
            raise ValueError("store.url is required when store.backend is postgres (postgresql://…)")
        if self.url is not None and self.backend == "sqlite":
            raise ValueError("store.url names PostgreSQL but store.backend is sqlite; remove one of them")
        return self


def postgres_url_problem(url: str) -> str:
    """``url`` if it is a PostgreSQL URL without a password; else ``ValueError`` saying what to fix."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"must start with postgresql:// (got {parts.scheme or 'no scheme'}://)")
    if parts.password is not None:
        raise ValueError(
            "must not contain a password: put it in an environment variable and name that"
            " variable in store.password_env"
        )
    if not parts.hostname:
        raise ValueError("names no host: postgresql://user@host:5432/database")
    try:
        parts.port  # noqa: B018  (a bad port raises here)
    except ValueError as exc:
        raise ValueError(f"has a bad port: {exc}") from None
    return url


class EchoConfig(_Section):
    chunk_delay_ms: float = Field(30.0, ge=0)
    chunk_chars: int = Field(6, ge=1)


class OpenAIConfig(_Section):
    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    api_key_env: EnvName = "OPENAI_API_KEY"
    temperature: float | None = None
    max_tokens: int | None = Field(None, ge=1)
    timeout_seconds: float = Field(120.0, gt=0)
    context_length: int | None = Field(None, ge=512)
    """Tokens the model reads and writes per call: the history is trimmed to fit (unset: never)."""
    vision: bool = False
    """The model reads images."""
    image_output: bool = False
    """Ask the model for images too (``modalities: [image, text]``, as OpenRouter's image models
    take); the images a model returns are sent to the chat like attached files either way."""
    stream_usage: Literal["auto", "always", "never"] = "auto"
    """Ask for the model's token counts (``stream_options``); ``auto`` stops asking if refused."""

    @model_validator(mode="after")
    def _answer_fits(self) -> OpenAIConfig:
        too_long = self.context_length is not None and (self.max_tokens or 0) >= self.context_length // 2
        if too_long:
            raise ValueError("max_tokens must be under half of context_length (the rest is the prompt's)")
        return self


class AgentConfig(_Section):
    kind: Literal["echo", "openai"] = "echo"
    echo: EchoConfig = EchoConfig()
    openai: OpenAIConfig = OpenAIConfig()
    turn_timeout_seconds: float = Field(600.0, gt=0)
    history_limit: int = Field(50, ge=0)
    silence_marker: str = "NO_REPLY"
    """A final equal to this sends nothing (the agent chose not to answer); empty to disable."""
    system_prompt: str = Field("", max_length=100_000)
    """The persona: the system prompt before the pinned conversation context."""
    system_prompt_file: str | None = None
    """A file to read the persona from at start (instead of ``system_prompt``)."""
    system_prompts: dict[str, str] = {}
    """Overrides by ``platform`` or ``platform:chat_id``; the most specific wins."""
    profiles: dict[str, OpenAIConfig] = {}
    """More models by name, beside ``openai`` (the ``default`` profile): ``/model NAME`` switches."""
    mcp: McpConfig = McpConfig()
    """MCP servers whose tools the agent is offered, each call behind the approval gate."""

    @model_validator(mode="after")
    def _one_persona_source(self) -> AgentConfig:
        if self.system_prompt and self.system_prompt_file:
            raise ValueError("set agent.system_prompt or agent.system_prompt_file, not both")
        return self

    @field_validator("profiles")
    @classmethod
    def _profile_names(cls, value: dict[str, OpenAIConfig]) -> dict[str, OpenAIConfig]:
        seen: set[str] = set()
        for name in value:
            if not PROFILE_NAME.fullmatch(name):
                raise ValueError(
                    f"{name[:70]!r} is not a usable profile name: letters, digits and . _ : -"
                    " (at most 64, starting with a letter or digit; it is typed after /model)"
                )
            if name.lower() == DEFAULT_PROFILE or name.lower() in seen:
                raise ValueError(
                    f"{name!r} is taken: 'default' is agent.openai, and names differ in more than case"
                )
            seen.add(name.lower())
        return value

    def model_profiles(self) -> Profiles:
        """What the engine and the API know of the profiles: ``default`` (``agent.openai``) first."""
        if self.kind != "openai":
            return Profiles((ModelProfile(DEFAULT_PROFILE, model=self.kind),))
        named = {DEFAULT_PROFILE: self.openai, **self.profiles}
        return Profiles(
            tuple(
                ModelProfile(name, p.model, p.context_length, p.max_tokens, p.vision)
                for name, p in named.items()
            )
        )

    @model_validator(mode="after")
    def _profiles_need_openai(self) -> AgentConfig:
        if self.profiles and self.kind != "openai":
            raise ValueError(
                "agent.profiles needs agent.kind: openai (the profiles are OpenAI-compatible models)"
            )
        return self


class IsolationOverride(_Section):
    group_sessions_per_user: bool | None = None
    thread_sessions_per_user: bool | None = None


class SessionsConfig(_Section):
    group_sessions_per_user: bool = True
    thread_sessions_per_user: bool = False
    platforms: dict[str, IsolationOverride] = {}
    busy_policy: Literal["queue", "interrupt"] = "queue"


class SchedulerConfig(_Section):
    max_concurrent_turns: int = Field(64, ge=1)
    lease_seconds: float = Field(30.0, gt=0)
    max_turn_attempts: int = Field(2, ge=1)


class DeliveryConfig(_Section):
    max_attempts: int = Field(8, ge=1)
    send_timeout_seconds: float = Field(30.0, gt=0)
    max_age_seconds: float = Field(24 * 3600.0, gt=0)
    """Replies not delivered within this long are abandoned (logged) instead of sent late."""
    duplicate_marker: str = "(possible repeat) "
    """Prefixed to a reply re-sent after a send whose outcome is unknown; empty to disable."""
    rate_limits: dict[str, RateLimitsConfig] = {}  # per platform, over the adapter's (config_rates.py)


class ShutdownConfig(_Section):
    drain_seconds: float = Field(30.0, ge=0)
    """How long running turns may take to finish before they are returned to the queue."""
    outbox_flush_seconds: float = Field(5.0, ge=0)
    adapter_close_seconds: float = Field(5.0, ge=0)
    hard_deadline_seconds: float = Field(60.0, gt=0)
    """After this long in shutdown the process exits regardless (nothing committed is lost)."""


class ToolsConfig(_Section):
    enabled: bool = False
    """Offer the agent the shell tool (dangerous commands wait for a human's approval).
    Off by default: it runs commands as the gateway's user."""
    workdir: str | None = None
    """Where commands run. Defaults to ``<state_dir>/workdir`` (created at start)."""
    timeout_seconds: float = Field(60.0, gt=0)
    """A command running longer is killed with its children."""
    output_cap: int = Field(16_000, ge=0)
    """Bytes of stdout and of stderr the agent sees; the rest is counted, not shown."""
    sandbox: Literal["none", "bwrap"] = "none"
    """``bwrap``: every command runs in bubblewrap (work directory writable, the rest of the
    file system read-only, private /tmp, no network); start-up fails if it cannot."""
    sandbox_network: bool = False
    """With the sandbox on, let commands reach the network."""
    env: list[str] = []
    """Names of the gateway's environment variables a command may see. Every command, sandboxed
    or not, otherwise gets only PATH, HOME (the work directory), LANG/LC_ALL, TERM=dumb and git's
    settings, so model keys and bot tokens stay out of what it can print (docs/approvals.md)."""

    attach_files: bool = True
    """With the shell tool on, also offer ``attach_file``: the agent sends a file from the work
    directory with its reply (asked like ``cat <path>`` would be; docs/media.md)."""
    attach_max_bytes: int = Field(50_000_000, gt=0)
    """The largest file ``attach_file`` takes (each platform may take less: docs/media.md)."""

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        return check_names(value)  # a ValueError names the variable and why it cannot be passed


class ApprovalsConfig(_Section):
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    timeout_seconds: float = Field(300.0, gt=0)
    """A prompt not answered within this long is denied (the command is not run)."""
    approvers: dict[str, list[str]] = {}
    """Per platform, user ids who may answer any prompt in that platform's chats (the
    person whose message asked may always answer their own)."""
    rules: list[dict[str, Any]] = []
    """Extra danger rules: ``{key, pattern, description, max_tier}`` (docs/approvals-rules.md)."""
    allow: dict[str, Any] = {}
    """Changes to the allow-list of programs that may run unasked: ``program: {options,
    operands, writes, ...}`` adds or replaces one, ``program: false`` removes one
    (docs/approvals.md)."""

    @field_validator("allow")
    @classmethod
    def _allow_entries(cls, value: dict[str, Any]) -> dict[str, Any]:
        load_allow(value)  # a ValueError names the program and the field
        return value

    @field_validator("rules")
    @classmethod
    def _rules_compile(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        load_rules(value)  # a ValueError names the entry and its key
        return value

    @field_validator("approvers")
    @classmethod
    def _platform_names(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        return {
            name.strip().lower(): [u.strip() for u in users if u.strip()] for name, users in value.items()
        }


class LocksConfig(_Section):
    credential_dir: str | None = None
    """Machine-wide directory for per-credential locks (default: <tmp>/chatgate-locks)."""


class GatewayConfig(BaseModel):
    """The whole config; ``load_config`` reads it from the YAML file and ``CHATGATE_*`` variables."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    profile: str = "default"
    state_dir: str | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    http: HttpConfig = HttpConfig()
    store: StoreConfig = StoreConfig()
    agent: AgentConfig = AgentConfig()
    sessions: SessionsConfig = SessionsConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    delivery: DeliveryConfig = DeliveryConfig()
    platforms: PlatformSections = Field(default_factory=lambda: PlatformSections.validate({}))
    shutdown: ShutdownConfig = ShutdownConfig()
    locks: LocksConfig = LocksConfig()
    tools: ToolsConfig = ToolsConfig()
    approvals: ApprovalsConfig = ApprovalsConfig()
    pairing: PairingConfig = PairingConfig()
    schedules: SchedulesConfig = SchedulesConfig()
    hooks: HooksConfig = HooksConfig()
    background: BackgroundConfig = BackgroundConfig()
    delegation: DelegationConfig = DelegationConfig()
    media: MediaConfig = MediaConfig()

    @model_validator(mode="before")
    @classmethod
    def _any_case_choices(cls, data: Any) -> Any:
        return fold_literal_case(cls, data)


def secret(environ: Any, name: str | None) -> str | None:
    return environ.get(name) if name else None
