"""The agent's files reach an API client: ``attach_file`` (the echo agent's ``!attach``) through a
real in-process gateway, asked by the unmodified ``openai`` client. The answer ends with a link per
file and lists them typed (``chatgate_files``); the link serves the bytes, as a download, only to
the key that made the request, streamed or not, and again from the stored answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from chatgate.domain.api_keys import ApiExchange
from chatgate.domain.outfiles import OutFile
from chatgate.platforms.api.file_links import with_links
from support.media_files import pdf, png


def tools(work: Path) -> dict[str, Any]:
    return {"enabled": True, "workdir": str(work)}


def workdir(tmp_path: Path) -> tuple[Path, bytes, bytes]:
    work = tmp_path / "work"
    work.mkdir()
    image, report = png(64, 48, (0, 128, 255)), pdf("quarterly figures")
    (work / "chart.png").write_bytes(image)
    (work / "report (final).pdf").write_bytes(report)
    return work, image, report


async def test_an_answers_files_are_links_only_its_key_can_fetch(api, tmp_path: Path) -> None:
    work, image, report = workdir(tmp_path)
    world = await api(tools=tools(work))
    async with world.client() as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="chatgate",
            messages=[
                {"role": "user", "content": "!attach chart.png | the chart\n!attach report (final).pdf"}
            ],
        )
    body = raw.http_response.json()
    text = body["choices"][0]["message"]["content"]
    files = body["chatgate_files"]
    assert [(f["filename"], f["mime_type"], f["bytes"]) for f in files] == [
        ("chart.png", "image/png", len(image)),
        ("report (final).pdf", "application/pdf", len(report)),
    ]
    assert files[0]["caption"] == "the chart"
    chart, doc = files[0]["url"], files[1]["url"]
    assert chart.startswith(f"{world.base}/v1/files/file-") and chart.endswith("/content")
    report_link = f"[report \\(final\\).pdf]({doc})"  # its brackets stay text
    assert text.splitlines()[-2:] == [f"[chart.png]({chart}) the chart", report_link]
    async with world.http() as http:
        got = await http.get(chart)
        assert got.status_code == 200 and got.content == image
        assert got.headers["content-type"] == "image/png"
        assert got.headers["content-disposition"].startswith("attachment;")
        assert got.headers["x-content-type-options"] == "nosniff"
        assert "sandbox" in got.headers["content-security-policy"]
        assert (await http.get(doc)).content == report
        missing = await http.get(chart.replace("-0/content", "-7/content"))
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        assert (await http.get(f"{world.base}/v1/files/../../etc/passwd/content")).status_code == 404
    _, other = await world.new_key("someone else")
    async with world.http(other) as http:
        refused = await http.get(chart)  # a real key, but not the one that asked
        assert refused.status_code == 404, refused.text
    async with httpx.AsyncClient() as anonymous:
        assert (await anonymous.get(chart)).status_code == 401
    async with world.http() as http:  # the stored answer names the same files
        again = (await http.get(f"{world.base}/v1/chat/completions/{body['id']}")).json()
    assert again["chatgate_files"] == files and again["choices"][0]["message"]["content"] == text


async def test_a_streamed_answer_and_a_response_end_with_the_links(api, tmp_path: Path) -> None:
    work, image, _ = workdir(tmp_path)
    world = await api(tools=tools(work))
    async with world.client() as client:
        stream = await client.chat.completions.create(
            model="chatgate", messages=[{"role": "user", "content": "!attach chart.png"}], stream=True
        )
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        response = await client.responses.with_raw_response.create(
            model="chatgate", input="!attach chart.png"
        )
    link = streamed.splitlines()[-1]
    assert link.startswith("[chart.png](") and link.endswith("/content)"), streamed
    body = response.http_response.json()
    (item,) = [o for o in body["output"] if o["type"] == "message"]
    url = body["chatgate_files"][0]["url"]
    assert item["content"][0]["text"].endswith(f"[chart.png]({url})")
    async with world.http() as http:
        assert (await http.get(url)).content == image
        stored = (await http.get(f"{world.base}/v1/responses/{body['id']}")).json()
    assert stored["chatgate_files"] == body["chatgate_files"]


def test_a_files_name_stays_text_in_its_link() -> None:
    exchange = ApiExchange(
        1, "k", {}, "done", "ok", 0.0, "here", files=(OutFile("a" * 64, "x](y) [z.txt", "text/plain", 3),)
    )
    assert with_links("here", exchange, "d" * 32, "http://h/") == (
        f"here\n\n[x\\]\\(y\\) \\[z.txt](http://h/v1/files/file-{'d' * 32}-0/content)"
    )
    assert with_links("here", None, "d" * 32, "http://h") == "here"
