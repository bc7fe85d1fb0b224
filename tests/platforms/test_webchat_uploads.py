"""Web chat uploads over real HTTP and sockets to a real gateway: the conversation's owner
uploads a file, the message frame names its signed ref, and the agent receives it; another
browser, another conversation, a forged ref and a bad file are refused with their reasons."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx

from chatgate.domain.media import human_size
from support.media_files import png, spoken_ogg
from support.web_harness import StartGateway, WebClient, of_type, web_config

Connect = Callable[[int], Awaitable[WebClient]]
ANN = {"X-Chatgate-User": "user-ann"}
BOB = {"X-Chatgate-User": "user-bob"}


def _change(port: int, who: dict[str, str]) -> dict[str, str]:
    return {**who, "Origin": f"http://127.0.0.1:{port}", "Content-Type": "application/octet-stream"}


async def test_an_uploaded_image_reaches_the_agent_with_the_message(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    port = gateway.port
    assert port is not None
    ann = await connect_client(port)
    await ann.hello("c-ann", "user-ann")
    image = png(50, 40)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        answer = await http.post(
            "/api/conversations/c-ann/uploads?name=../../screen shot.png",
            headers=_change(port, ANN),
            content=image,
        )
    assert answer.status_code == 200, answer.text
    upload = answer.json()
    assert (upload["name"], upload["mime"], upload["size"]) == ("screen shot.png", "image/png", len(image))
    await ann.send(
        {
            "type": "message",
            "id": "m1",
            "text": "",
            "attachments": [{"ref": upload["ref"], "name": upload["name"]}],
        }
    )
    frames = await ann.until_final("m1")
    (final,) = of_type(frames, "final")
    assert final["text"] == f"echo: received screen shot.png (image/png, {human_size(len(image))})"


async def test_uploads_are_the_owners_and_refs_are_bound_to_their_conversation(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    port = gateway.port
    assert port is not None
    ann = await connect_client(port)
    await ann.hello("c-ann", "user-ann")
    bob = await connect_client(port)
    await bob.hello("c-bob", "user-bob")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        url = "/api/conversations/c-ann/uploads?name=a.txt"
        assert (await http.post(url, headers=_change(port, BOB), content=b"hi")).status_code == 404
        assert (await http.post(url, headers=ANN, content=b"hi")).status_code == 403  # no Origin
        svg = await http.post(
            "/api/conversations/c-ann/uploads?name=x.svg",
            headers=_change(port, ANN),
            content=b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
        )
        assert svg.status_code == 422 and "SVG" in svg.json()["message"]
        good = (await http.post(url, headers=_change(port, ANN), content=b"notes\n")).json()
    # Bob names Ann's upload in his conversation: refused, nothing admitted.
    await bob.send({"type": "message", "id": "b1", "text": "look", "attachments": [{"ref": good["ref"]}]})
    (refused,) = of_type(await bob.sync(), "error")[:1]
    assert refused["code"] == "invalid_frame" and refused["id"] == "b1"
    # A ref whose claimed type was changed no longer verifies.
    forged = good["ref"].replace("text/plain", "image/png")
    await ann.send({"type": "message", "id": "a1", "text": "x", "attachments": [{"ref": forged}]})
    (refused,) = of_type(await ann.sync(), "error")[:1]
    assert refused["code"] == "invalid_frame" and refused["id"] == "a1"
    await ann.send(
        {
            "type": "message",
            "id": "a2",
            "text": "my notes",
            "attachments": [{"ref": good["ref"], "name": "a.txt"}],
        }
    )
    (final,) = of_type(await ann.until_final("a2"), "final")
    assert final["text"] == "echo: my notes\nreceived a.txt (text/plain, 6 B)"


async def test_without_media_there_is_no_upload_route(start_gateway: StartGateway) -> None:
    gateway = await start_gateway(web_config(media={"enabled": False}))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}") as http:
        answer = await http.post(
            "/api/conversations/c/uploads", headers=_change(gateway.port or 0, ANN), content=b"x"
        )
    assert answer.status_code in (404, 405)


async def test_an_uploaded_voice_note_is_transcribed_and_its_transcript_shown(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    port = gateway.port
    assert port is not None
    ann = await connect_client(port)
    await ann.hello("c-ann", "user-ann")
    voice = spoken_ogg("one two three four five six seven eight nine ten")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        answer = await http.post(
            "/api/conversations/c-ann/uploads?name=memo.ogg", headers=_change(port, ANN), content=voice
        )
    assert answer.status_code == 200, answer.text
    upload = answer.json()
    assert upload["mime"] == "audio/ogg"
    await ann.send(
        {
            "type": "message",
            "id": "v1",
            "text": "",
            "attachments": [{"ref": upload["ref"], "name": "memo.ogg"}],
        }
    )
    frames = await ann.until_final("v1")
    words = {"three", "five", "seven", "nine"}
    (notice,) = of_type(frames, "notice")  # shown before the answer, as a reply to the voice note
    assert notice["in_reply_to"] == "v1" and notice["text"].startswith("Transcript: ")
    assert set(notice["text"].split()) >= words
    (final,) = of_type(frames, "final")
    (line,) = [
        x for x in final["text"].splitlines() if x.startswith("[transcript of the voice note memo.ogg]: ")
    ]
    assert set(line.split()) >= words


async def test_an_upload_past_the_users_quota_is_refused_naming_the_limit(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway(web_config(media={"quota_mb_per_user": 0.01}))  # 10 kB
    port = gateway.port
    assert port is not None
    ann = await connect_client(port)
    await ann.hello("c-ann", "user-ann")
    url = "/api/conversations/c-ann/uploads?name=notes.txt"
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        big = await http.post(url, headers=_change(port, ANN), content=b"x" * 12_000 + b"\n")
        assert big.status_code == 422
        assert "your files may take 10.0 kB at most and already take 0 B" in big.json()["message"]
        assert "media.quota_mb_per_user" in big.json()["message"]
        good = (await http.post(url, headers=_change(port, ANN), content=b"y" * 6_000 + b"\n")).json()
        files = [{"ref": good["ref"], "name": "notes.txt"}]
        await ann.send({"type": "message", "id": "a1", "text": "", "attachments": files})
        (final,) = of_type(await ann.until_final("a1"), "final")
        assert final["text"] == "echo: received notes.txt (text/plain, 6.0 kB)"  # now counted: 6 kB
        more = await http.post(url, headers=_change(port, ANN), content=b"z" * 6_000 + b"\n")
        assert more.status_code == 422 and "already take 6.0 kB" in more.json()["message"]
    # The retention sweep (media.retention_days, 90 by default) is the engine's task: running, and
    # cancelled and awaited by the gateway's stop.
    fetcher = gateway.engine.media
    assert fetcher is not None and fetcher.sweeper is not None
    task = fetcher.sweeper._task
    assert task is not None and not task.done()
    await gateway.stop()
    assert task.done() and fetcher.sweeper._task is None
