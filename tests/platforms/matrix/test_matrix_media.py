"""A file sent in a Matrix room reaches the agent: uploaded by a real client to a real Synapse,
named by its ``mxc://`` URI, downloaded by the gateway through the homeserver's authenticated
media API."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatgate.domain.media import human_size
from matrix.client import shown_by
from matrix.conftest import Gateways
from matrix.harness import People, joined, matrix_config, wait_for
from support.media_files import png

pytestmark = pytest.mark.slow


async def test_an_image_sent_in_a_dm_is_downloaded_from_the_homeserver_and_reaches_the_agent(
    people: People, gateways: Gateways, tmp_path: Path
) -> None:
    bot, ann = people.account("bot"), people.person("ann")
    await gateways.start(matrix_config(people.server, bot, tmp_path), bot)
    room = await ann.create_room(invite=[bot.user_id], direct=True)
    await joined(ann, room, bot.user_id)
    image = png(48, 32)
    headers = {"Authorization": f"Bearer {ann.account.token}", "Content-Type": "image/png"}
    async with people.http.post(
        people.server.base + "/_matrix/media/v3/upload?filename=plot.png", data=image, headers=headers
    ) as response:
        assert response.status == 200, await response.text()
        mxc = (await response.json())["content_uri"]
    content = {
        "msgtype": "m.image",
        "body": "plot.png",
        "url": mxc,
        "info": {"mimetype": "image/png", "size": len(image)},
    }
    await ann.send(room, content)
    expected = f"received plot.png (image/png, {human_size(len(image))})"

    async def answered() -> list:
        return [s for s in shown_by(await ann.events(room), bot.user_id) if expected in s.text]

    [answer] = await wait_for(answered, 60, "the answer")
    assert answer.text.startswith("echo: plot.png\n")
