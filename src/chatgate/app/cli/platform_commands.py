"""Each platform's own subcommands (``chatgate user``, ``chatgate api-key``), from its plugin."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from chatgate.app import registry
from chatgate.app.cli.common import admin_config, resolve_state_dir
from chatgate.app.store_access import open_store
from chatgate.engine.ports import PlatformStores
from chatgate.platforms.kit.plugin import CommandTools, Purpose
from chatgate.platforms.kit.section import PlatformSection


def add_platform_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: Callable[[argparse.ArgumentParser], None],
) -> None:
    for name in registry.names():
        registry.plugin(name).add_commands(sub, _tools(name, common))


def _tools(name: str, common: Callable[[argparse.ArgumentParser], None]) -> CommandTools:
    @asynccontextmanager
    async def store(args: argparse.Namespace, purpose: Purpose) -> AsyncIterator[PlatformStores]:
        config = admin_config(args)
        async with open_store(config, resolve_state_dir(args.state_dir, config), purpose=purpose) as opened:
            yield opened

    def section(args: argparse.Namespace) -> PlatformSection:
        return getattr(admin_config(args).platforms, name)  # type: ignore[no-any-return]

    return CommandTools(common=common, open_store=store, section=section)
