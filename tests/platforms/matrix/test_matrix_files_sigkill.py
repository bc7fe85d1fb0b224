"""A real ``chatgate run`` SIGKILLed while the agent's file goes out to a real Synapse: after the
restart the file is in the room exactly once, with its bytes.

An HTTP proxy between the gateway and Synapse forwards everything, but the first time it sees
the held request it lets Synapse act on it and never answers: ``upload`` (the file is stored in
the media repository, no event yet) or ``event`` (the event is posted, its id never comes back).
The gateway is killed while it waits. The restart uploads the file again (the first copy is left
unused) and sends the event under the row's transaction id: after a held upload it is the first
event; after a held event the homeserver answers with the event already posted."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from yarl import URL

from matrix.harness import TOKEN_ENV, People, joined, matrix_config, wait_for
from matrix.test_matrix_files_out import download, files_by
from support.media_files import png
from support.procs import GatewayProcess, free_port

pytestmark = pytest.mark.slow


class HoldingProxy:
    """Forwards every request to Synapse; the first ``held`` one reaches Synapse, and its answer
    is kept until ``release`` (the gateway that asked is killed before that)."""

    def __init__(self, target: str, held: str) -> None:
        self.target, self.held = target, held
        self.base = f"http://127.0.0.1:{free_port()}"
        self.uploads: list[str] = []
        self.file_events: list[str] = []
        self.holding: str | None = None
        self.released = asyncio.Event()
        self._http = aiohttp.ClientSession()
        self._runner = web.AppRunner(web.Application(), shutdown_timeout=1.0)
        self._runner.app.router.add_route("*", "/{tail:.*}", self._forward)

    async def start(self) -> None:
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", URL(self.base).port).start()

    async def close(self) -> None:
        self.released.set()
        await self._runner.cleanup()
        await self._http.close()

    def _kind(self, request: web.Request) -> str | None:
        path = request.path
        if request.method == "POST" and path.startswith("/_matrix/media/v3/upload"):
            self.uploads.append(path)
            return "upload"
        if request.method == "PUT" and "/send/m.room.message/" in path and path.endswith(".file"):
            self.file_events.append(path)
            return "event"
        return None

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        kind = self._kind(request)
        body = await request.read()
        headers = {k: v for k in ("Authorization", "Content-Type") if (v := request.headers.get(k))}
        where = URL(self.target + request.raw_path, encoded=True)
        async with self._http.request(
            request.method, where, data=body or None, headers=headers,
            timeout=aiohttp.ClientTimeout(total=120),
        ) as answer:  # fmt: skip
            status, data = answer.status, await answer.read()
            kept = {k: v for k in ("Content-Type", "Retry-After") if (v := answer.headers.get(k))}
        if kind is not None and kind == self.held and self.holding is None:
            self.holding = f"{kind}: HTTP {status}"  # Synapse has acted; the gateway never hears
            await self.released.wait()
        return web.Response(status=status, body=data, headers=kept)


def file_rows(state: Path) -> list[str]:
    db = sqlite3.connect(state / "chatgate.db", timeout=30)
    try:
        return [r[0] for r in db.execute("SELECT status FROM outbox WHERE idem_key LIKE 'file:%'")]
    finally:
        db.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("held", ["upload", "event"])
async def test_a_sigkill_while_a_file_goes_out_posts_it_once(
    people: People, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: str
) -> None:
    bot, ann = people.account("bot"), people.person("ann")
    monkeypatch.setenv(TOKEN_ENV, bot.token)
    work = tmp_path / "work"
    work.mkdir()
    image = png(40, 30, (200, 0, 0))
    (work / "red.png").write_bytes(image)
    proxy = HoldingProxy(people.server.base, held)
    await proxy.start()
    config = matrix_config(people.server, bot, tmp_path, tools={"enabled": True, "workdir": str(work)})
    del config["http"]
    config["platforms"]["matrix"]["homeserver"] = proxy.base
    gateway = GatewayProcess(tmp_path, config)
    state = gateway.state_dir
    try:
        await gateway.start()
        room = await ann.create_room(invite=[bot.user_id], direct=True)
        await joined(ann, room, bot.user_id)
        await ann.send(room, {"msgtype": "m.text", "body": "!attach red.png | red"})
        await wait_for(lambda: proxy.holding, 60, f"the file's {held} held by the proxy")
        await gateway.kill()
        await gateway.start()
        await wait_for(lambda: file_rows(state) == ["sent"], 60, "the file row sent after the restart")
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
        await proxy.close()

    posted: list[dict[str, Any]] = files_by(await ann.events(room), bot.user_id)
    assert len(posted) == 1, posted  # once, whatever the kill cut short
    (picture,) = posted
    assert (picture["msgtype"], picture["filename"]) == ("m.image", "red.png")
    assert picture["info"] == {"mimetype": "image/png", "size": len(image), "w": 40, "h": 30}
    assert await download(people, ann.account.token, picture["url"]) == image
    assert len(proxy.uploads) == 2  # the restart uploaded again: the first copy stays unused
    if held == "event":  # the resend went under the same transaction id; the first event stands
        assert len(proxy.file_events) == 2 and proxy.file_events[0] == proxy.file_events[1]
        assert picture["body"] == "red"
    else:  # never posted, but the gateway cannot know: marked, as a text reply resent after a crash is
        assert len(proxy.file_events) == 1
        assert picture["body"] == "(possible repeat) red"
    print(f"\nMatrix file, SIGKILL with the {held} held: one event, body {picture['body']!r}")
