"""Configuration: one YAML file plus ``CHATGATE_*`` environment overrides.

Validated with pydantic at start-up so a mistake is reported with the offending
key before anything connects. Secrets are never in the YAML: the file names the
environment variable that holds each one.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import urlsplit

import msgspec

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
from chatgate.platforms.kit.conform import whole_number
from chatgate.platforms.kit.section import Check, EnvName
from chatgate.platforms.kit.section import Section as _Section


def _networks(values: list[str]) -> list[str]:
    for value in values:
        try:
            ipaddress.ip_network(value.strip(), strict=False)
        except ValueError:
            raise ValueError(f"{value!r} is not an IP address or network (10.0.0.0/8, ::1)") from None
    return [str(ipaddress.ip_network(v.strip(), strict=False)) for v in values]


class HttpConfig(_Section, kw_only=True):
    host: str = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 8765
    max_connections: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 1000
    """Open HTTP and WebSocket connections; the process needs this many descriptors plus 128."""
    header_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 10.0
    """How long a connection may take to send a request's headers (slowloris guard)."""
    keep_alive_seconds: Annotated[int, msgspec.Meta(ge=1, le=3600)] = 5
    """How long an idle HTTP keep-alive connection stays open between requests."""
    max_unauthenticated: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 256
    """Connections at once whose client has not proved who it is (no hello with the right token,
    no session cookie, no API key, no signed delivery yet; health probes too). Past it, a new
    one takes the place of the oldest that is only waiting (for headers, a body, a hello), so
    strangers cannot take the places of users, API clients and probes."""
    max_unauthenticated_per_address: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 32
    """How many of those one client address may hold (a proxy in ``trusted_proxies``: no cap);
    its next one takes the place of its own oldest waiting one."""
    auth_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 10.0
    """How long a web chat WebSocket may take to send an accepted hello before it is closed (4408)."""
    body_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 5.0
    """How long a request body may take before ``min_body_bytes_per_second`` applies to it."""
    min_body_bytes_per_second: Annotated[float, msgspec.Meta(gt=0, le=1e9)] = 1024.0
    """The slowest a request body may arrive, on average, once ``body_timeout_seconds`` have
    passed since its headers; a slower one is answered 408 and closed (every route that reads a
    body: webhooks, Slack events, the API, sign-in)."""
    trusted_proxies: Annotated[list[str], Check(_networks)] = []
    """Addresses or networks (``10.0.0.5``, ``10.0.0.0/8``, ``::1``) of reverse proxies whose
    ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed. From anyone else those headers
    are ignored: a client could name any address and get a fresh sign-in budget, or claim https."""

    @classmethod
    def before(cls, data: dict[str, Any]) -> dict[str, Any]:
        if "max_unauthenticated" in data:
            return data
        connections = whole_number(data.get("max_connections", 1000))
        if connections is not None and connections >= 1:  # else max_connections' own problem is said
            data["max_unauthenticated"] = min(256, connections)  # unset: within the connections
        return data

    def __post_init__(self) -> None:
        if self.max_unauthenticated > self.max_connections:
            raise ValueError(
                f"http.max_unauthenticated ({self.max_unauthenticated}) must be at most"
                f" http.max_connections ({self.max_connections})"
            )


class SqliteConfig(_Section, kw_only=True):
    path: str | None = None
    """Defaults to ``<state_dir>/chatgate.db``."""
    synchronous: Literal["OFF", "NORMAL", "FULL", "EXTRA"] = "FULL"
    group_commit: bool = True


class PostgresConfig(_Section, kw_only=True):
    schema_: Annotated[str, msgspec.Meta(pattern=r"^[a-z_][a-z0-9_]{0,62}\Z")] = msgspec.field(
        default="public", name="schema"
    )
    """The schema the fleet's tables live in (created if missing); one fleet per schema."""
    pool_size: Annotated[int, msgspec.Meta(ge=1, le=200)] = 10
    """Connections each process keeps open (plus one for its liveness lock)."""
    connect_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=300)] = 5.0
    outbox_lease_seconds: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 300.0
    """How long a message being sent stays claimed before another process may resend it
    (a process that died is noticed at once by the next start; this bounds the rest)."""


class StoreConfig(_Section, kw_only=True):
    backend: Literal["sqlite", "postgres"] = "sqlite"
    """``postgres`` when ``url`` is set (setting ``url`` is enough)."""
    url: Annotated[str, Check(postgres_url_problem)] | None = None
    """``postgresql://user@host:port/database``: a fleet of gateways shares it. No password here."""
    password_env: EnvName | None = None
    """The environment variable holding the PostgreSQL password (never in the YAML)."""
    sqlite: SqliteConfig = msgspec.field(default_factory=SqliteConfig)
    postgres: PostgresConfig = msgspec.field(default_factory=PostgresConfig)

    @classmethod
    def before(cls, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("url") is not None and "backend" not in data:
            data["backend"] = "postgres"  # setting url is enough
        return data

    def __post_init__(self) -> None:
        if self.url is None and self.backend == "postgres":
            raise ValueError("store.url is required when store.backend is postgres (postgresql://…)")
        if self.url is not None and self.backend == "sqlite":
            raise ValueError("store.url names PostgreSQL but store.backend is sqlite; remove one of them")


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


class EchoConfig(_Section, kw_only=True):
    chunk_delay_ms: Annotated[float, msgspec.Meta(ge=0)] = 30.0
    chunk_chars: Annotated[int, msgspec.Meta(ge=1)] = 6


class OpenAIConfig(_Section, kw_only=True):
    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    api_key_env: EnvName = "OPENAI_API_KEY"
    temperature: float | None = None
    max_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 120.0
    context_length: Annotated[int, msgspec.Meta(ge=512)] | None = None
    """Tokens the model reads and writes per call: the history is trimmed to fit (unset: never)."""
    vision: bool = False
    """The model reads images."""
    image_output: bool = False
    """Ask the model for images too (``modalities: [image, text]``, as OpenRouter's image models
    take); the images a model returns are sent to the chat like attached files either way."""
    stream_usage: Literal["auto", "always", "never"] = "auto"
    """Ask for the model's token counts (``stream_options``); ``auto`` stops asking if refused."""

    def __post_init__(self) -> None:
        too_long = self.context_length is not None and (self.max_tokens or 0) >= self.context_length // 2
        if too_long:
            raise ValueError("max_tokens must be under half of context_length (the rest is the prompt's)")


def _profile_names(value: dict[str, OpenAIConfig]) -> dict[str, OpenAIConfig]:
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


class AgentConfig(_Section, kw_only=True):
    kind: Literal["echo", "openai"] = "echo"
    echo: EchoConfig = msgspec.field(default_factory=EchoConfig)
    openai: OpenAIConfig = msgspec.field(default_factory=OpenAIConfig)
    turn_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 600.0
    history_limit: Annotated[int, msgspec.Meta(ge=0)] = 50
    silence_marker: str = "NO_REPLY"
    """A final equal to this sends nothing (the agent chose not to answer); empty to disable."""
    system_prompt: Annotated[str, msgspec.Meta(max_length=100_000)] = ""
    """The persona: the system prompt before the pinned conversation context."""
    system_prompt_file: str | None = None
    """A file to read the persona from at start (instead of ``system_prompt``)."""
    system_prompts: dict[str, str] = {}
    """Overrides by ``platform`` or ``platform:chat_id``; the most specific wins."""
    profiles: Annotated[dict[str, OpenAIConfig], Check(_profile_names)] = {}
    """More models by name, beside ``openai`` (the ``default`` profile): ``/model NAME`` switches."""
    mcp: McpConfig = msgspec.field(default_factory=McpConfig)
    """MCP servers whose tools the agent is offered, each call behind the approval gate."""

    def __post_init__(self) -> None:
        if self.system_prompt and self.system_prompt_file:
            raise ValueError("set agent.system_prompt or agent.system_prompt_file, not both")
        if self.profiles and self.kind != "openai":
            raise ValueError(
                "agent.profiles needs agent.kind: openai (the profiles are OpenAI-compatible models)"
            )

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


class IsolationOverride(_Section, kw_only=True):
    group_sessions_per_user: bool | None = None
    thread_sessions_per_user: bool | None = None


class SessionsConfig(_Section, kw_only=True):
    group_sessions_per_user: bool = True
    thread_sessions_per_user: bool = False
    platforms: dict[str, IsolationOverride] = {}
    busy_policy: Literal["queue", "interrupt"] = "queue"


class SchedulerConfig(_Section, kw_only=True):
    max_concurrent_turns: Annotated[int, msgspec.Meta(ge=1)] = 64
    lease_seconds: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    max_turn_attempts: Annotated[int, msgspec.Meta(ge=1)] = 2


class DeliveryConfig(_Section, kw_only=True):
    max_attempts: Annotated[int, msgspec.Meta(ge=1)] = 8
    send_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    max_age_seconds: Annotated[float, msgspec.Meta(gt=0)] = 24 * 3600.0
    """Replies not delivered within this long are abandoned (logged) instead of sent late."""
    duplicate_marker: str = "(possible repeat) "
    """Prefixed to a reply re-sent after a send whose outcome is unknown; empty to disable."""
    rate_limits: dict[str, RateLimitsConfig] = {}  # per platform, over the adapter's (config_rates.py)


class ShutdownConfig(_Section, kw_only=True):
    drain_seconds: Annotated[float, msgspec.Meta(ge=0)] = 30.0
    """How long running turns may take to finish before they are returned to the queue."""
    outbox_flush_seconds: Annotated[float, msgspec.Meta(ge=0)] = 5.0
    adapter_close_seconds: Annotated[float, msgspec.Meta(ge=0)] = 5.0
    hard_deadline_seconds: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    """After this long in shutdown the process exits regardless (nothing committed is lost)."""


class ToolsConfig(_Section, kw_only=True):
    enabled: bool = False
    """Offer the agent the shell tool (dangerous commands wait for a human's approval).
    Off by default: it runs commands as the gateway's user."""
    workdir: str | None = None
    """Where commands run. Defaults to ``<state_dir>/workdir`` (created at start)."""
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    """A command running longer is killed with its children."""
    output_cap: Annotated[int, msgspec.Meta(ge=0)] = 16_000
    """Bytes of stdout and of stderr the agent sees; the rest is counted, not shown."""
    sandbox: Literal["none", "bwrap"] = "none"
    """``bwrap``: every command runs in bubblewrap (work directory writable, the rest of the
    file system read-only, private /tmp, no network); start-up fails if it cannot."""
    sandbox_network: bool = False
    """With the sandbox on, let commands reach the network."""
    env: Annotated[list[str], Check(check_names)] = []
    """Names of the gateway's environment variables a command may see. Every command, sandboxed
    or not, otherwise gets only PATH, HOME (the work directory), LANG/LC_ALL, TERM=dumb and git's
    settings, so model keys and bot tokens stay out of what it can print (docs/approvals.md)."""

    attach_files: bool = True
    """With the shell tool on, also offer ``attach_file``: the agent sends a file from the work
    directory with its reply (asked like ``cat <path>`` would be; docs/media.md)."""
    attach_max_bytes: Annotated[int, msgspec.Meta(gt=0)] = 50_000_000
    """The largest file ``attach_file`` takes (each platform may take less: docs/media.md)."""


def _allow_entries(value: dict[str, Any]) -> dict[str, Any]:
    load_allow(value)  # a ValueError names the program and the field
    return value


def _rules_compile(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    load_rules(value)  # a ValueError names the entry and its key
    return value


def _platform_names(value: dict[str, list[str]]) -> dict[str, list[str]]:
    return {name.strip().lower(): [u.strip() for u in users if u.strip()] for name, users in value.items()}


class ApprovalsConfig(_Section, kw_only=True):
    numbers_as_text: ClassVar[bool] = True

    timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    """A prompt not answered within this long is denied (the command is not run)."""
    approvers: Annotated[dict[str, list[str]], Check(_platform_names)] = {}
    """Per platform, user ids who may answer any prompt in that platform's chats (the
    person whose message asked may always answer their own)."""
    rules: Annotated[list[dict[str, Any]], Check(_rules_compile)] = []
    """Extra danger rules: ``{key, pattern, description, max_tier}`` (docs/approvals-rules.md)."""
    allow: Annotated[dict[str, Any], Check(_allow_entries)] = {}
    """Changes to the allow-list of programs that may run unasked: ``program: {options,
    operands, writes, ...}`` adds or replaces one, ``program: false`` removes one
    (docs/approvals.md)."""


class LocksConfig(_Section, kw_only=True):
    credential_dir: str | None = None
    """Machine-wide directory for per-credential locks (default: <tmp>/chatgate-locks)."""


class GatewayConfig(_Section, kw_only=True):
    """The whole config; ``load_config`` reads it from the YAML file and ``CHATGATE_*`` variables."""

    profile: str = "default"
    state_dir: str | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    http: HttpConfig = msgspec.field(default_factory=HttpConfig)
    store: StoreConfig = msgspec.field(default_factory=StoreConfig)
    agent: AgentConfig = msgspec.field(default_factory=AgentConfig)
    sessions: SessionsConfig = msgspec.field(default_factory=SessionsConfig)
    scheduler: SchedulerConfig = msgspec.field(default_factory=SchedulerConfig)
    delivery: DeliveryConfig = msgspec.field(default_factory=DeliveryConfig)
    platforms: PlatformSections = msgspec.field(default_factory=lambda: PlatformSections.validate({}))
    shutdown: ShutdownConfig = msgspec.field(default_factory=ShutdownConfig)
    locks: LocksConfig = msgspec.field(default_factory=LocksConfig)
    tools: ToolsConfig = msgspec.field(default_factory=ToolsConfig)
    approvals: ApprovalsConfig = msgspec.field(default_factory=ApprovalsConfig)
    pairing: PairingConfig = msgspec.field(default_factory=PairingConfig)
    schedules: SchedulesConfig = msgspec.field(default_factory=SchedulesConfig)
    hooks: HooksConfig = msgspec.field(default_factory=HooksConfig)
    background: BackgroundConfig = msgspec.field(default_factory=BackgroundConfig)
    delegation: DelegationConfig = msgspec.field(default_factory=DelegationConfig)
    media: MediaConfig = msgspec.field(default_factory=MediaConfig)


def secret(environ: Any, name: str | None) -> str | None:
    return environ.get(name) if name else None
