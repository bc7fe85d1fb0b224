"""Discord attachments reach the agent: the native adapter downloads each from its CDN URL
(never with the bot token, never from another host) through the Discord double."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from discord_fake.harness import ANN, World, connected, discord_config, fake, run, wait_for, world
from discord_fake.server import FakeDiscord

from chatgate.domain.media import human_size
from support.media_files import pdf, png

__all__ = ["fake", "run", "world"]


async def test_an_image_and_a_pdf_are_downloaded_from_the_cdn_and_reach_the_agent(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    image, document = png(64, 64), pdf("Minutes of the meeting")
    files = [
        fake.attachment("a.png", image, "image/png"),
        fake.attachment("m.pdf", document, "application/pdf"),
    ]
    await fake.post(world.dm, ANN, "see these", attachments=files)
    await wait_for(lambda: fake.view(world.dm.id), 30, "the reply")
    (answer,) = fake.view(world.dm.id)
    assert answer.content == (
        "echo: see these\n"
        f"received a.png (image/png, {human_size(len(image))})\n"
        f"received m.pdf (application/pdf, {human_size(len(document))})"
    )
    assert fake.downloads == ["a.png", "m.pdf"]


async def test_a_url_off_discord_is_never_fetched_and_an_expired_one_is_a_note(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    elsewhere = {"id": "1", "filename": "x.png", "url": "http://169.254.169.254/latest/meta-data", "size": 9}
    expired = fake.attachment("gone.png", b"", "image/png")
    del fake.files["gone.png"]
    await fake.post(world.dm, ANN, "two", attachments=[elsewhere, expired])
    await wait_for(lambda: len(fake.view(world.dm.id)) == 3, 30, "two notices and the reply")
    texts = [m.content for m in fake.view(world.dm.id)]
    assert "[attachment x.png was not received: the file is not on Discord's servers]" in texts
    assert any(
        t.startswith("[attachment gone.png was not received: Discord refused the download (HTTP 404")
        for t in texts
    )
    assert fake.downloads == ["gone.png"]
