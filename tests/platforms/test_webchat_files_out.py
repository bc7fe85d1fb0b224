"""The agent's files in the web chat: a frame names the file with a link only the conversation's
owner can open (real gateway, real sockets and HTTP); the download is the file's bytes, always
as an attachment, never rendered; another browser, a changed link or another file are refused."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from support.media_files import png
from support.web_harness import StartGateway, WebClient, web_config

Connect = Callable[[int], Awaitable[WebClient]]
ANN = {"X-Chatgate-User": "user-ann"}
BOB = {"X-Chatgate-User": "user-bob"}


async def test_an_attached_file_is_a_link_only_its_owner_opens(
    start_gateway: StartGateway, connect_client: Connect, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    image = png(30, 20, (1, 2, 3))
    (workdir / "plot.png").write_bytes(image)
    (workdir / "page.html").write_text("<script>alert(1)</script>\n")
    gateway = await start_gateway(web_config(tools={"enabled": True, "workdir": str(workdir)}))
    port = gateway.port
    assert port is not None
    ann = await connect_client(port)
    await ann.hello("c-ann", "user-ann")
    bob = await connect_client(port)
    await bob.hello("c-bob", "user-bob")
    await ann.message("m1", "!attach plot.png | the plot\n!attach page.html")
    frames = await ann.until(lambda f: f.get("file", {}).get("name") == "page.html")
    files = [f for f in frames if f.get("file")]
    assert [f["file"]["name"] for f in files] == ["plot.png", "page.html"]
    plot, page = files[0], files[1]
    assert plot["type"] == "final" and plot["in_reply_to"] == "m1" and plot["text"] == "the plot"
    assert (plot["file"]["mime"], plot["file"]["size"]) == ("image/png", len(image))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        got = await http.get(plot["file"]["url"], headers=ANN)
        assert got.status_code == 200 and got.content == image
        assert got.headers["content-disposition"].startswith('attachment; filename="plot.png"')
        assert got.headers["x-content-type-options"] == "nosniff"
        html = await http.get(page["file"]["url"], headers=ANN)
        assert html.status_code == 200 and html.headers["content-type"].startswith("text/plain")
        assert "sandbox" in html.headers["content-security-policy"]
        # Bob, a changed type, and another sha through Ann's signature: all refused alike.
        assert (await http.get(plot["file"]["url"], headers=BOB)).status_code == 404
        assert (await http.get(plot["file"]["url"], headers={})).status_code in (400, 401, 403, 404)
        changed = plot["file"]["url"].replace("image%2Fpng", "text%2Fhtml")
        assert (await http.get(changed, headers=ANN)).status_code == 404
        # page.html's signature does not open plot.png's sha.
        page_path, page_query = page["file"]["url"].split("?")
        plot_sha = plot["file"]["url"].split("/files/")[1].split("?")[0]
        swapped = page_path.rsplit("/", 1)[0] + f"/{plot_sha}?{page_query}"
        assert (await http.get(swapped, headers=ANN)).status_code == 404
        # The conversation's history (a reload) links the file again, for its owner only.
        history = (await http.get("/api/conversations/c-ann/messages", headers=ANN)).json()["items"]
        (again,) = [i for i in history if i.get("file", {}).get("name") == "plot.png"]
        assert again["id"] == plot["message_id"] and again["text"] == "the plot"
        assert (await http.get(again["file"]["url"], headers=ANN)).content == image
        as_bob = plot["file"]["url"].replace("/c-ann/", "/c-bob/")
        assert (await http.get(as_bob, headers=BOB)).status_code == 404
