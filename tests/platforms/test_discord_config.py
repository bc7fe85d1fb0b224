"""Discord's config and credential lock: mistakes named at start-up, one gateway per bot token."""

from __future__ import annotations

from pathlib import Path

import pytest
from discord_fake.harness import ANN, World, discord_config, echo_of, fake, wait_for, world
from discord_fake.server import FakeDiscord
from discord_fake.state import TOKEN, TOKEN_ENV

from chatgate.app.config import ConfigError, GatewayConfig
from chatgate.app.config.secrets import check_secrets
from chatgate.platforms.kit.conform import conform
from support.procs import GatewayProcess

__all__ = ["fake", "world"]


def test_an_unset_token_variable_is_named_with_what_to_do(
    tmp_path: Path, fake: FakeDiscord, world: World
) -> None:
    config = conform(GatewayConfig, discord_config(fake, world, tmp_path))
    with pytest.raises(
        ConfigError, match=r"platforms\.discord\.token_env: environment variable .* is not set"
    ):
        check_secrets(config, {})
    check_secrets(config, {TOKEN_ENV: TOKEN})
    missing = conform(
        GatewayConfig, dict(**discord_config(fake, world, tmp_path, discord={"token_env": None}))
    )
    with pytest.raises(ConfigError, match=r"platforms\.discord\.token_env: required"):
        check_secrets(missing, {})


def test_unknown_keys_and_bad_values_are_named(tmp_path: Path, fake: FakeDiscord, world: World) -> None:
    with pytest.raises(ValueError, match="require_mentoin"):
        conform(
            GatewayConfig, dict(**discord_config(fake, world, tmp_path, discord={"require_mentoin": False}))
        )
    with pytest.raises(ValueError, match="catch_up_hours"):
        conform(GatewayConfig, dict(**discord_config(fake, world, tmp_path, discord={"catch_up_hours": -1})))


@pytest.mark.slow
@pytest.mark.timeout(200)
async def test_a_second_gateway_with_the_same_bot_token_is_refused_and_the_first_keeps_answering(
    fake: FakeDiscord, world: World, tmp_path: Path
) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    config = discord_config(fake, world, tmp_path)
    del config["http"]
    first = GatewayProcess(tmp_path / "one", config)
    second = GatewayProcess(tmp_path / "two", config)
    await first.start()
    try:
        assert first.proc is not None
        await second.start(wait=False)
        assert second.proc is not None
        code = await second.proc.wait()
        refused = second.logs()
        assert code == 78, refused
        assert f"pid {first.proc.pid}" in refused and "discord" in refused and "already in use" in refused
        assert TOKEN not in refused
        await fake.post(world.dm, ANN, "still yours?")
        await wait_for(lambda: fake.view(world.dm.id), 60, "the first gateway's answer")
        assert fake.view(world.dm.id)[0].content == echo_of("still yours?")
        assert fake.gateway.identifies == 1
    finally:
        if first.proc is not None and first.proc.returncode is None:
            await first.kill()
