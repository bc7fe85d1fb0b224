"""The gateway's token against the simulator's independent verifier, and its two 4401 reactions."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from chatgate.app.gateway import Gateway
from chatgate.platforms.relay.auth import make_upgrade_token
from relaysim import verify_token
from support.relay_harness import GW, SECRET, RelayWorld, relay_hub


async def _metrics(gateway: Gateway) -> str:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=30) as http:
        return (await http.get("/metrics")).text


def test_the_simulator_verifies_the_gateways_token() -> None:
    token = make_upgrade_token(GW, SECRET)
    assert verify_token(token, {GW: [SECRET]}) == GW


async def test_a_4401_before_any_handshake_is_retried_until_the_secret_is_accepted(
    world: RelayWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.sim.set_secrets(GW, ["a-different-secret"])
    gateway = await world.start()
    await world.wait_for(lambda: world.sim.counters(GW).closes_4401 >= 3, "three refused dials")
    assert not relay_hub(gateway).connection.state.revoked
    assert any("relay" in reason or "discord" in reason for reason in await gateway.ready())
    world.sim.set_secrets(GW, [SECRET])  # provisioning caught up
    await world.sim.wait_connected(GW, 10)
    assert await relay_hub(gateway).connection.wait_connected(10)
    assert await gateway.ready() == []


async def test_a_4401_after_a_handshake_is_a_revocation_and_the_gateway_stops_dialing(
    world: RelayWorld,
) -> None:
    gateway = await world.start()
    await world.sim.wait_connected(GW, 10)
    connections = world.sim.counters(GW).connections
    assert 'chatgate_adapter_connected{platform="discord"} 1.0' in await _metrics(gateway)
    world.sim.revoke(GW)
    state = relay_hub(gateway).connection.state
    await world.wait_for(lambda: state.revoked, "the revocation to be noticed")
    # The gauge follows each scrape (no /readyz needed to refresh it).
    assert 'chatgate_adapter_connected{platform="discord"} 0.0' in await _metrics(gateway)
    reasons = await gateway.ready()
    assert any("revoked" in r and "disabled" in r for r in reasons), reasons
    status = await gateway.status()
    assert "revoked" in status["adapters"]["discord"]["detail"]
    world.sim.set_secrets(GW, [SECRET])  # even a now-valid secret must not be tried again
    await asyncio.sleep(1.0)  # twenty reconnect periods (0.05 s): a dial would have happened by now
    assert world.sim.counters(GW).connections == connections
    assert not world.sim.connected(GW)
