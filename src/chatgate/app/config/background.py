"""The ``schedules`` and ``hooks`` sections: work that starts outside a chat turn (issue 19)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

from chatgate.domain.schedules import Schedule, ScheduleError, ScheduleTarget, check_spec, parse_duration
from chatgate.domain.source import Source
from chatgate.platforms.kit.section import Check, EnvName, Section

if TYPE_CHECKING:
    from chatgate.engine.schedules import ScheduleSettings
    from chatgate.engine.tasks import TaskSettings
    from chatgate.engine.webhooks import HookRoute

ROUTE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


class TargetConfig(Section, kw_only=True):
    """A chat (``platform`` + ``chat_id``, and the rest of its source) or a session by its key."""

    session: str | None = None
    """An existing session's key, e.g. ``agent:main:web:dm:ops`` (``chatgate sessions`` lists them)."""
    platform: str | None = None
    chat_id: str | None = None
    chat_type: Literal["dm", "group", "channel", "thread", "forum"] = "dm"
    user_id: str | None = None
    thread_id: str | None = None
    scope_id: str | None = None

    def __post_init__(self) -> None:
        if self.session is None and not (self.platform and self.chat_id):
            raise ValueError("name a chat (platform and chat_id) or a session (its key)")
        if self.session is not None and (self.platform or self.chat_id):
            raise ValueError("name either a session or a chat (platform, chat_id), not both")

    def target(self) -> ScheduleTarget:
        if self.session is not None:
            return ScheduleTarget(None, self.session)
        assert self.platform is not None
        source = Source(
            platform=self.platform,
            chat_id=self.chat_id,
            chat_type=self.chat_type,
            user_id=self.user_id,
            thread_id=self.thread_id,
            scope_id=self.scope_id,
        )
        return ScheduleTarget(source, None)


class ScheduleConfig(Section, kw_only=True):
    every: str | None = None
    """An interval: ``30s``, ``10m``, ``1h30m``, ``1d`` (phase: from the first start)."""
    cron: str | None = None
    """Five fields (minute hour day month weekday) or six with seconds first, in UTC."""
    text: Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]
    target: TargetConfig
    deliver_only: bool = False
    """Post ``text`` to the target chat as it is, without running the agent."""

    def __post_init__(self) -> None:
        if (self.every is None) == (self.cron is None):
            raise ValueError("give exactly one of every (an interval such as 10m) or cron (an expression)")
        try:
            if self.every is not None:
                parse_duration(self.every)
            else:
                check_spec("cron", self.cron or "")
        except ScheduleError as exc:
            raise ValueError(str(exc)) from None

    def timing(self) -> tuple[Literal["every", "cron"], str]:
        if self.every is not None:
            return "every", str(parse_duration(self.every))
        return "cron", self.cron or ""


def _names_of(what: str) -> Check:
    """Every key of the mapping is a name for ``what``: lower-case letters, digits, - and _."""

    def check(named: dict[str, Any]) -> dict[str, Any]:
        for name in named:
            if not ROUTE_NAME.match(name):
                raise ValueError(f"{name!r}: a {what} name is lower-case letters, digits, - and _")
        return named

    return Check(check)


class SchedulesConfig(Section, kw_only=True):
    enabled: bool = True
    """The runner, and ``/remind``, ``/every``, ``/schedules`` in chats."""
    jobs: Annotated[dict[str, ScheduleConfig], _names_of("schedule")] = {}
    """Schedules by name; their ids are ``config:<name>``."""
    chat_min_interval_seconds: Annotated[float, msgspec.Meta(ge=1)] = 60.0
    """The shortest repeat ``/every`` accepts in a chat."""
    chat_max_per_session: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 20
    """How many schedules one chat's session may hold."""
    chat_max_per_user: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 50
    """Chat schedules one user may hold across all their chats on a platform (a bound on what
    one person can make the gateway keep and fire, whatever the number of chats)."""

    def settings(self) -> ScheduleSettings | None:
        """The engine's schedule settings (None: off), the jobs as ``config:<name>`` rows."""
        # the engine's types only where the gateway builds its settings, not for `config check`
        from chatgate.engine.schedule_commands import ChatScheduleLimits
        from chatgate.engine.schedules import ScheduleSettings

        if not self.enabled:
            return None
        jobs = []
        for name, job in self.jobs.items():
            kind, spec = job.timing()
            jobs.append(
                Schedule(
                    id=f"config:{name}",
                    kind=kind,
                    spec=spec,
                    text=job.text,
                    target=job.target.target(),
                    origin="config",
                    next_fire_at=None,
                    created_at=0.0,
                    deliver_only=job.deliver_only,
                    name=name,
                )
            )
        limits = ChatScheduleLimits(
            self.chat_min_interval_seconds, self.chat_max_per_session, self.chat_max_per_user
        )
        return ScheduleSettings(jobs=tuple(jobs), limits=limits)


class BackgroundConfig(Section, kw_only=True):
    enabled: bool = True
    """``/bg``, ``/tasks`` and ``/cancel`` in chats."""
    max_running_per_session: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 10


class DelegationConfig(Section, kw_only=True):
    enabled: bool = False
    """Offer the agent the ``delegate(task)`` tool (needs an agent that calls tools)."""
    max_age_hours: Annotated[float, msgspec.Meta(gt=0)] = 48.0
    """A delegated task still pending this long after its dispatch is closed at the next start."""


def task_settings(background: BackgroundConfig, delegation: DelegationConfig) -> TaskSettings | None:
    from chatgate.engine.tasks import TaskSettings  # only where the gateway builds its settings

    if not background.enabled and not delegation.enabled:
        return None
    return TaskSettings(
        max_running_per_session=background.max_running_per_session,
        delegation=delegation.enabled,
        max_age_hours=delegation.max_age_hours,
        commands=background.enabled,
    )


class HookRouteConfig(Section, kw_only=True):
    auth: Literal["hmac", "bearer"] = "hmac"
    """``hmac``: the hex SHA-256 HMAC of ``<timestamp>.<delivery id>.<body>``, keyed by the
    secret, in ``signature_header`` (docs/background-work.md has a worked example);
    ``bearer``: ``Authorization: Bearer <secret>``."""
    secret_env: EnvName
    """The environment variable that holds the route's secret (required; never in the YAML)."""
    signature_header: Annotated[str, msgspec.Meta(min_length=1, max_length=100)] = "X-Chatgate-Signature"
    signature_prefix: Annotated[str, msgspec.Meta(max_length=100)] = "sha256="
    delivery_header: Annotated[str, msgspec.Meta(min_length=1, max_length=100)] = "X-Delivery-Id"
    """The header whose value names the delivery: a retry with the same value runs once. It is
    signed, so a captured body cannot be replayed under a new id."""
    timestamp_header: Annotated[str, msgspec.Meta(min_length=1, max_length=100)] = "X-Chatgate-Timestamp"
    """(``hmac``) The header with the Unix time, in seconds, at which the delivery was signed."""
    max_age_seconds: Annotated[float, msgspec.Meta(ge=1, le=86_400)] = 300.0
    """(``hmac``) How far a delivery's signed timestamp may be from the gateway's clock, either
    way; an older (or later) one is refused as stale, so a captured delivery expires."""
    template: Annotated[str, msgspec.Meta(min_length=1, max_length=4000)] = "Webhook $route: $body"
    """The prompt: ``$route``, ``$body`` (the JSON), ``${a.b}`` for a field of the body."""
    target: TargetConfig
    deliver_only: bool = False
    """Post the rendered template to the target chat without running the agent."""
    max_body_bytes: Annotated[int, msgspec.Meta(ge=1, le=4 * 1024 * 1024)] = 256 * 1024


class HooksConfig(Section, kw_only=True):
    enabled: bool = False
    routes: Annotated[dict[str, HookRouteConfig], _names_of("route")] = {}
    """``POST /hooks/<name>`` per route."""


def hook_secret_problem(hooks: HooksConfig, environ: Any) -> str | None:
    """A route whose secret is not in the environment: the error to show (a route never runs open)."""
    if not hooks.enabled:
        return None
    for name, route in hooks.routes.items():
        if not environ.get(route.secret_env):
            return (
                f"hooks.routes.{name}.secret_env: environment variable {route.secret_env} is not set;"
                " export it with the secret the sender signs with (it never goes in the YAML file)"
            )
    return None


def webhooks_for(hooks: HooksConfig, environ: Any) -> dict[str, HookRoute]:
    """The configured routes with their secrets read from the environment (checked at load)."""
    from chatgate.engine.webhooks import HookRoute  # only where the gateway builds its routes

    if not hooks.enabled:
        return {}
    return {
        name: HookRoute(
            name=name,
            auth=route.auth,
            secret=str(environ.get(route.secret_env, "")).encode(),
            target=route.target.target(),
            template=route.template,
            signature_header=route.signature_header,
            signature_prefix=route.signature_prefix,
            delivery_header=route.delivery_header,
            timestamp_header=route.timestamp_header,
            max_age_seconds=route.max_age_seconds,
            deliver_only=route.deliver_only,
            max_body_bytes=route.max_body_bytes,
        )
        for name, route in hooks.routes.items()
    }
