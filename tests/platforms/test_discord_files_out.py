"""The agent's files reach Discord as message attachments: the native adapter's multipart
create-message (``payload_json`` + ``files[0]``) to the Discord double, which parses it as
Discord does. A retried upload carries the row's nonce with ``enforce_nonce``: Discord's own
dedupe, so a SIGKILL mid-upload still posts the file exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from discord_fake.harness import ANN, World, connected, discord_config, fake, run, wait_for, world
from discord_fake.server import FakeDiscord

from support.media_files import png
from support.procs import GatewayProcess

__all__ = ["fake", "run", "world"]


def _files(fake: FakeDiscord, channel_id: str) -> list[Any]:
    return [m for m in fake.view(channel_id) if m.attachments]


async def test_an_attached_file_is_one_message_with_its_bytes(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    image = png(33, 22, (9, 9, 9))
    (workdir / "graph.png").write_bytes(image)
    await run(discord_config(fake, world, tmp_path, tools={"enabled": True, "workdir": str(workdir)}))
    await connected(fake)
    await fake.post(world.dm, ANN, "!attach graph.png | the graph")
    await wait_for(lambda: _files(fake, world.dm.id), 30, "the file")
    (message,) = _files(fake, world.dm.id)
    assert message.content == "the graph"
    (attachment,) = message.attachments
    assert attachment["filename"].endswith("graph.png") and attachment["content_type"] == "image/png"
    assert fake.uploaded == [("graph.png", "image/png", image)]


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_sigkill_mid_upload_posts_the_file_once(
    fake: FakeDiscord, world: World, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    image = png(20, 20, (200, 0, 0))
    (workdir / "red.png").write_bytes(image)
    config = discord_config(fake, world, tmp_path, tools={"enabled": True, "workdir": str(workdir)})
    del config["http"]
    gateway = GatewayProcess(tmp_path, config)
    fake.hang_uploads = 1  # Discord posts it; the answer never comes
    await gateway.start()
    try:
        await wait_for(lambda: fake.gateway.identifies == 1 and fake.gateway.current, 60, "IDENTIFY")
        await fake.post(world.dm, ANN, "!attach red.png | red")
        await wait_for(lambda: len(fake.uploaded) == 1, 60, "the upload")
        await gateway.kill()
        await gateway.start()
        await wait_for(lambda: len(fake.uploaded) == 2, 60, "the upload again, after the restart")
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
    (message,) = _files(fake, world.dm.id)  # the resend was Discord's dedupe: no second message
    assert message.content == "red"  # and not marked as a repeat: Discord said it is the same message
    assert [data for _, _, data in fake.uploaded] == [image, image]
