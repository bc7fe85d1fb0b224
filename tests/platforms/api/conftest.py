"""API fixtures: ``api`` starts a real in-process gateway with the API on and one key."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from support.api_harness import ApiWorld, api_config
from support.web_harness import StartGateway, _no_chatgate_env, start_gateway, web_config

__all__ = ["_no_chatgate_env", "api", "start_gateway"]


@pytest.fixture
async def api(start_gateway: StartGateway) -> AsyncIterator[Callable[..., Any]]:
    """``await api(**config)``: a gateway with the API on (plus ``config``) and one key."""

    async def start(**overrides: Any) -> ApiWorld:
        values = api_config()
        for section, value in overrides.items():
            if section == "api":
                values["platforms"]["api"].update(value)
            else:
                values[section] = value
        gateway = await start_gateway(web_config(**values))
        world = ApiWorld(gateway, "", "")
        world.key_id, world.token = await world.new_key("tests")
        return world

    yield start
