"""A platform plugin: everything the rest of the gateway needs to know about one platform.

The registry (``chatgate.app.registry``) maps a ``platforms:`` section name to a plugin's
import path and imports only the configured ones. A plugin module must stay cheap to
import (its config model and this protocol): the adapter's own imports (a platform's
client library) happen in ``build``. Nothing outside ``platforms/`` names a platform;
whatever differs between platforms is answered here.
"""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

import msgspec

from chatgate.domain.access import PlatformAccess
from chatgate.domain.errors import ConfigError
from chatgate.engine.ports import Adapter, PlatformContext, PlatformStores
from chatgate.platforms.kit.init import InitAnswers, Prompter
from chatgate.platforms.kit.section import PlatformSection

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

SectionT = TypeVar("SectionT", bound=PlatformSection)


class Extra(msgspec.Struct, frozen=True):
    """The pip extra a platform needs beyond the defaults, and the modules it installs."""

    name: str
    modules: tuple[str, ...]

    def missing(self) -> str | None:
        """The first module of the extra that is not installed, or None."""
        return next((m for m in self.modules if importlib.util.find_spec(m) is None), None)

    def hint(self, what: str) -> str:
        module = self.missing() or self.modules[0]
        return f"{what} needs `pip install 'chatgate[{self.name}]'` (the {module} package is not installed)"


class Secret(msgspec.Struct, frozen=True):
    """A ``*_env`` key of a section: the variable it names must hold a value when enabled."""

    key: str
    """The key in the section (``token_env``)."""
    env: str | None
    """The variable it names (None: the key is unset)."""
    what: str
    """What the variable holds and where it comes from ("the token from @BotFather")."""


class CoreView(msgspec.Struct, frozen=True):
    """What of the core config a platform may read (its checks and access rules)."""

    http_host: str = "127.0.0.1"
    """``http.host``: where the HTTP server listens."""
    http_loopback: bool = True
    """The HTTP server listens on loopback only."""
    send_timeout: float = 30.0
    """``delivery.send_timeout_seconds``: a platform call not answered within this is ambiguous."""


class Credential(msgspec.Struct, frozen=True):
    """A platform credential one process may use at a time, across state directories."""

    kind: str
    value: str
    what: str
    """What it is, for the error a second process gets ("bot token")."""


class PlatformBuild(msgspec.Struct):
    """What a plugin's ``build`` gives the gateway."""

    adapters: list[Adapter] = msgspec.field(default_factory=list)
    credentials: list[Credential] = msgspec.field(default_factory=list)
    routes: list[BaseRoute] = msgspec.field(default_factory=list)
    """Routes of the gateway's HTTP app: a page and its socket, ``/v1/...``, an events endpoint."""
    preflight: list[Callable[[], Awaitable[str | None]]] = msgspec.field(default_factory=list)
    """Checks run once the store is open, before anything is served: a problem refuses the
    start-up with its message (accounts with no users)."""
    allowed_origins: frozenset[str] = frozenset()
    """Other origins whose pages may call this gateway (also for ``/status``)."""

    def extend(self, other: PlatformBuild) -> None:
        self.adapters.extend(other.adapters)
        self.credentials.extend(other.credentials)
        self.routes.extend(other.routes)
        self.preflight.extend(other.preflight)
        self.allowed_origins |= other.allowed_origins


Purpose = Literal["read", "change", "create"]
"""What a command does with the store: ``create`` makes an empty state first if there is none."""


class CommandTools(msgspec.Struct, frozen=True):
    """What the ``chatgate`` command lends a platform's own subcommands (``chatgate user``)."""

    common: Callable[[argparse.ArgumentParser], None]
    """Adds ``--config`` and ``--state-dir`` to a subcommand's parser."""
    open_store: Callable[[argparse.Namespace, Purpose], AbstractAsyncContextManager[PlatformStores]]
    """The store of the config and state directory the arguments name, beside a running gateway;
    ``NoDatabaseYet`` (``domain/errors.py``) for ``read``/``change`` where none exists."""
    section: Callable[[argparse.Namespace], PlatformSection]
    """This platform's section of the config the arguments name (no secret needs to be set)."""


class Plugin(Generic[SectionT]):
    """One platform, whole. Subclasses set the class attributes and implement ``build``."""

    name: ClassVar[str]
    """The ``platforms:`` section name (``telegram``)."""
    title: ClassVar[str]
    """How people call it (``Telegram``)."""
    section: type[SectionT]
    """The section's pydantic model; ``enabled`` comes from ``PlatformSection``."""
    extra: ClassVar[Extra | None] = None
    doc: ClassVar[str] = ""
    """Its page under ``docs/`` (``docs/platforms/telegram.md``)."""
    summary: ClassVar[str] = ""
    """One line for ``chatgate init``'s list of platforms."""

    # ------------------------------------------------------------ config

    def platforms(self, section: SectionT) -> tuple[str, ...]:
        """The platform names it serves (``Source.platform``): rate limits and access are per name."""
        return (self.name,)

    def secrets(self, section: SectionT) -> list[Secret]:
        """The ``*_env`` keys that must name a set variable while the section is enabled."""
        return []

    def check(self, section: SectionT, environ: Mapping[str, str], core: CoreView) -> None:
        """Refuse a mistake ``ConfigError`` names (key, problem, fix); runs when the config loads.

        The default checks ``secrets``; a plugin with rules across keys adds them."""
        for secret in self.secrets(section):
            require_secret(self.name, secret, environ)

    def access(self, section: SectionT, core: CoreView) -> dict[str, PlatformAccess]:
        """Who may talk, per platform name (admission's rules; default deny)."""
        allow_all = bool(getattr(section, "allow_all", False))
        users = frozenset(str(u) for u in getattr(section, "allow_users", ()))
        pairing = bool(getattr(section, "pairing", False))
        return {name: PlatformAccess(allow_all, users, pairing) for name in self.platforms(section)}

    # ------------------------------------------------------------ running

    def build(self, section: SectionT, ctx: PlatformContext) -> PlatformBuild:
        """Its adapters over the engine's ports (the client library is imported here)."""
        raise NotImplementedError

    # ------------------------------------------------------------ its own commands

    guide: ClassVar[tuple[str, ...]] = ()
    """Lines of ``chatgate``'s short guide for its commands."""

    def add_commands(
        self, sub: argparse._SubParsersAction[argparse.ArgumentParser], tools: CommandTools
    ) -> None:
        """Its own ``chatgate`` subcommands (the web chat's ``user``, the API's ``api-key``)."""

    # ------------------------------------------------------------ chatgate doctor

    live_check_displaces: ClassVar[bool] = False
    """Whether ``live_check`` would take the credential from a gateway running with it (a
    second relay connection with one gateway id): then it is not run beside one."""

    def live_check(self, section: SectionT, environ: Mapping[str, str]) -> str | None:
        """Prove the credentials against the real service now, as ``init`` does: what was found,
        or ``CheckFailed`` saying why not. Blocking. None: nothing to check live."""
        return None

    # ------------------------------------------------------------ chatgate init

    asks_access: ClassVar[bool] = True
    """Whether ``init``'s "who may talk" question (pairing or an allowlist) applies to it."""

    def init_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Flags of ``chatgate init`` for its questions (``--telegram-token-env``)."""

    def init_ask(self, p: Prompter, current: Mapping[str, Any], args: argparse.Namespace) -> InitAnswers:
        """Ask its questions (defaults from the current section), check the credentials live."""
        return InitAnswers(section={})

    def init_access(self, values: dict[str, Any], pairing: bool, allow_users: list[str]) -> None:
        """Write ``init``'s access answer into the section's values."""
        values.update(pairing=pairing, allow_users=list(allow_users))

    def init_current_access(self, current: Mapping[str, Any]) -> tuple[bool, list[str]] | None:
        """The access a written section has (the defaults of a re-run), if it sets any."""
        users = [str(u) for u in current.get("allow_users") or []]
        if not current.get("enabled"):
            return None
        return bool(current.get("pairing")) or not users, users


def require_secret(section: str, secret: Secret, environ: Mapping[str, str]) -> None:
    """The one "secret not set" check: the key must name a variable, and it must hold a value."""
    where = f"platforms.{section}.{secret.key}"
    if not secret.env:
        raise ConfigError(
            f"{where}: required when platforms.{section}.enabled is true; name the environment variable"
            f" that holds {secret.what} (secrets never go in the YAML file)"
        )
    if not environ.get(secret.env):
        raise ConfigError(
            f"{where}: environment variable {secret.env} is not set; export it with {secret.what}"
        )
