"""Files in API requests reach the model: content parts sent by the unmodified ``openai`` client
(``image_url`` as a data: URL or an http(s) URL, ``file``, ``input_audio``, the Responses API's
``input_image`` / ``input_file``), taken into the blob store before admission, through the real
gateway, to a fake vision model that names the bytes it received. Bad parts are a 400 naming
the part; a URL on a private address is never fetched unless the operator allows it."""

from __future__ import annotations

import base64
import hashlib
import io
import sqlite3
import wave
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from agents.fake_openai_server import API_KEY, KEY_ENV, Answer, FakeOpenAIServer, agent_section
from chatgate.domain.media import human_size
from support.file_server import FileHandler, file_server
from support.media_files import pdf, png, png_bomb


def last_user_content(body: dict[str, Any]) -> Any:
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


def vision_model(body: dict[str, Any]) -> str:
    """Names the sha256 and size of every image it was sent, and the text it read."""
    content = last_user_content(body)
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    seen = []
    for part in parts:
        if part["type"] == "image_url":
            header, data = part["image_url"]["url"].split(",", 1)
            raw = base64.b64decode(data)
            seen.append(f"image {header} {len(raw)} bytes sha256={hashlib.sha256(raw).hexdigest()}")
        else:
            seen.append(f"text: {part['text']}")
    return "\n".join(seen)


def seen(image: bytes) -> str:
    return f"image data:image/png;base64 {len(image)} bytes sha256={hashlib.sha256(image).hexdigest()}"


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer()
    server.script(Answer(vision_model))
    server.start()
    monkeypatch.setenv(KEY_ENV, API_KEY)
    yield server
    server.stop()


def agent(server: FakeOpenAIServer) -> dict[str, Any]:
    return agent_section(server, vision=True)


@pytest.fixture
def files() -> Iterator[tuple[str, type[FileHandler]]]:
    with file_server() as served:
        yield served


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def wav() -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 800)
    return out.getvalue()


def _admitted(world: Any) -> int:
    db = sqlite3.connect(world.gateway.store.path, timeout=30)
    try:
        return int(db.execute("SELECT COUNT(*) FROM inbox WHERE transport = 'api'").fetchone()[0])
    finally:
        db.close()


async def test_an_image_as_a_data_url_reaches_the_vision_model_as_its_bytes(api, model) -> None:
    world = await api(agent=agent(model))
    image = png(64, 48, (10, 120, 200))
    async with world.client() as client:
        answer = await client.chat.completions.create(
            model="chatgate",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what colour is this?"},
                        {"type": "image_url", "image_url": {"url": data_url(image)}},
                    ],
                }
            ],
        )
    text = answer.choices[0].message.content or ""
    assert seen(image) in text
    assert "what colour is this?" in text and "[attached: image.png (image/png" in text


async def test_an_image_url_is_fetched_when_private_addresses_are_allowed(api, model, files) -> None:
    base, handler = files
    image = png(40, 40, (1, 2, 3))
    handler.files["/shot.png"] = image
    world = await api(agent=agent(model), api={"allow_private_urls": True})
    async with world.client() as client:
        answer = await client.chat.completions.create(
            model="chatgate",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": f"{base}/moved"}},
                    ],
                }
            ],
        )
    text = answer.choices[0].message.content or ""
    assert seen(image) in text and "[attached: moved (image/png" in text
    assert handler.requests == ["/moved", "/shot.png"]


async def test_an_image_url_on_a_private_address_is_refused_and_never_fetched(api, files) -> None:
    base, handler = files
    handler.files["/shot.png"] = png()
    world = await api()
    async with world.client() as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="chatgate",
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "look"},
                            {"type": "image_url", "image_url": {"url": f"{base}/shot.png"}},
                        ],
                    }
                ],
            )
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["param"] == "messages.0.content.1"
    assert "private or local address" in error["message"]
    assert handler.requests == []
    assert _admitted(world) == 0


async def test_a_pdf_file_part_reaches_the_model_as_its_text(api, model) -> None:
    world = await api(agent=agent(model))
    document = pdf("Quarterly revenue rose by 12 percent")
    file_data = data_url(document, "application/pdf")
    async with world.client() as client:
        answer = await client.chat.completions.create(
            model="chatgate",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "summarise"},
                        {"type": "file", "file": {"file_data": file_data, "filename": "../q3.pdf"}},
                    ],
                }
            ],
        )
    text = answer.choices[0].message.content or ""
    assert "[content of q3.pdf (application/pdf" in text
    assert "Quarterly revenue rose by 12 percent" in text


async def test_audio_and_a_file_of_bare_base64_are_stored_and_named(api) -> None:
    world = await api()
    audio, notes = wav(), b"# notes\nbuy milk\n"
    async with world.client() as client:
        answer = await client.chat.completions.create(
            model="chatgate",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "input_audio",
                            "input_audio": {"data": base64.b64encode(audio).decode(), "format": "wav"},
                        },
                        {
                            "type": "file",
                            "file": {"file_data": base64.b64encode(notes).decode(), "filename": "notes.md"},
                        },
                    ],
                }
            ],
        )
    text = answer.choices[0].message.content or ""
    assert f"received audio.wav (audio/wav, {human_size(len(audio))})" in text
    assert f"received notes.md (text/markdown, {human_size(len(notes))})" in text


async def test_responses_input_image_and_input_file_reach_the_model(api, model) -> None:
    world = await api(agent=agent(model))
    image = png(20, 30, (200, 0, 0))
    notes = b"the launch is on Tuesday"
    async with world.client() as client:
        response = await client.responses.create(
            model="chatgate",
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "when is the launch?"},
                        {"type": "input_image", "image_url": data_url(image), "detail": "auto"},
                        {
                            "type": "input_file",
                            "filename": "plan.txt",
                            "file_data": base64.b64encode(notes).decode(),
                        },
                    ],
                }
            ],
        )
    assert seen(image) in response.output_text
    assert "the launch is on Tuesday" in response.output_text


def _svg() -> bytes:
    return b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


BAD_PARTS = [
    pytest.param(
        {"type": "image_url", "image_url": {"url": data_url(png()[:40])}}, "invalid_file", id="corrupt"
    ),
    pytest.param(
        {"type": "image_url", "image_url": {"url": data_url(_svg(), "image/svg+xml")}},
        "invalid_file",
        id="svg",
    ),
    pytest.param(
        {"type": "image_url", "image_url": {"url": data_url(png_bomb())}}, "invalid_file", id="bomb"
    ),
    pytest.param(
        {"type": "file", "file": {"file_data": base64.b64encode(b"x" * 3000).decode(), "filename": "a.txt"}},
        "invalid_file",
        id="too-big",
    ),
    pytest.param({"type": "image_url", "detail": "auto"}, "invalid_request", id="no-url"),
    pytest.param(
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}},
        "invalid_file",
        id="not-base64",
    ),
    pytest.param(
        {"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}, "invalid_file", id="file-scheme"
    ),
    pytest.param({"type": "file", "file": {"file_id": "file-abc"}}, "unsupported_parameter", id="file-id"),
    pytest.param({"type": "video_url", "video_url": {"url": "x"}}, "invalid_request", id="unknown-part"),
]


@pytest.mark.parametrize(("part", "code"), BAD_PARTS)
async def test_a_bad_part_is_a_400_naming_it_and_admits_nothing(api, part: dict[str, Any], code: str) -> None:
    world = await api(media={"max_bytes": 2000})
    body = {
        "model": "chatgate",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, part]}],
    }
    async with world.http() as http:
        response = await http.post("/v1/chat/completions", json=body)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert (error["param"], error["code"], error["type"]) == (
            "messages.0.content.1",
            code,
            "invalid_request_error",
        )
        good = await http.post(
            "/v1/chat/completions",
            json={"model": "chatgate", "messages": [{"role": "user", "content": "fine"}]},
        )
        assert good.status_code == 200
    assert _admitted(world) == 1


async def test_a_streamed_request_with_an_image_and_its_retry_run_once(api, model) -> None:
    world = await api(agent=agent(model))
    image = png(16, 16, (5, 5, 5))
    content = [
        {"type": "text", "text": "again?"},
        {"type": "image_url", "image_url": {"url": data_url(image)}},
    ]
    messages = [{"role": "user", "content": content}]
    headers = {"Idempotency-Key": "img-1"}
    async with world.client() as client:
        stream = await client.chat.completions.create(
            model="chatgate", messages=messages, stream=True, extra_headers=headers
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        again = await client.chat.completions.create(
            model="chatgate", messages=messages, extra_headers=headers
        )
    assert seen(image) in text
    assert again.choices[0].message.content == text
    assert _admitted(world) == 1


async def test_with_media_off_a_file_part_is_a_400_saying_so(api) -> None:
    world = await api(media={"enabled": False})
    content = [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": data_url(png())}}]
    async with world.http() as http:
        response = await http.post(
            "/v1/chat/completions",
            json={"model": "chatgate", "messages": [{"role": "user", "content": content}]},
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["param"], error["code"]) == ("messages.0.content.1", "files_disabled")
    assert _admitted(world) == 0
