"""The toy platform as a plugin: what ``registry.PLUGINS["toy"] = "toy_plugin:PLUGIN"`` serves.

This is the runnable version of "Register it" in ``docs/architecture.md``: a section model,
the access rule, and ``build`` over the engine's ports. Like a real plugin it imports only
``chatgate.domain``, ``chatgate.engine.ports`` and ``chatgate.platforms.kit``.
"""

from __future__ import annotations

from toy_platform import ToyAdapter

from chatgate.engine.ports import PlatformContext
from chatgate.platforms.kit.plugin import Credential, PlatformBuild, Plugin
from chatgate.platforms.kit.section import PlatformSection


class ToySection(PlatformSection):
    port: int = 0
    """Where the toy's line server listens (0: any free port)."""
    allow_users: list[str] = []  # noqa: RUF012  (msgspec copies an empty list per instance)
    """Who may talk on it (default deny, as everywhere)."""
    fail_at_start: bool = False
    """Make the adapter's start raise once its server is listening (the lifecycle test)."""


class BrokenStart(Exception):
    """The toy's start failed on purpose."""


class FailingToyAdapter(ToyAdapter):
    async def start(self) -> None:
        await super().start()  # the server is listening: a failed start must close it
        raise BrokenStart("the toy platform could not start (on purpose)")


class ToyPlugin(Plugin[ToySection]):
    name = "toy"
    title = "the toy platform"
    section = ToySection
    summary = "a line protocol on 127.0.0.1 (tests only)"

    def build(self, section: ToySection, ctx: PlatformContext) -> PlatformBuild:
        kind = FailingToyAdapter if section.fail_at_start else ToyAdapter
        adapter = kind(ctx.intake, port=section.port)
        credential = Credential("toy", f"port:{section.port}", "port")
        return PlatformBuild(adapters=[adapter], credentials=[credential])


PLUGIN = ToyPlugin()
