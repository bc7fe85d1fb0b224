"""Images a model returns reach the chat as photos: a fake OpenAI-compatible image model streams
them as ``delta.images`` data URLs (OpenRouter's shape) to the real OpenAI agent of a real
in-process gateway, which checks and stores each like an upload and sends it after the reply
through the Telegram double's sendPhoto. What is not an image by its content, or is malformed, is
a line in the reply instead; the reply itself always arrives."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from telegram_double import BotApiDouble, Gateways, User, private, telegram_config

from agents.fake_openai_server import API_KEY, KEY_ENV, FakeOpenAIServer, Reply, agent_section
from support.media_files import pdf, png


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer()
    server.start()
    monkeypatch.setenv(KEY_ENV, API_KEY)
    yield server
    server.stop()


def agent_config(server: FakeOpenAIServer) -> dict[str, Any]:
    return agent_section(server, image_output=True)


async def test_an_image_the_model_returns_is_sent_as_a_photo_after_its_reply(
    double: BotApiDouble, gateways: Gateways, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    user = User(801, "Ada")
    chat = private(user)
    drawn = png(96, 64, (200, 30, 30))
    model.script(Reply("Here is your red square.", images=(data_url(drawn),)))
    config = telegram_config(
        double, tmp_path, telegram={"allow_users": [str(user.id)]}, agent=agent_config(model)
    )
    await gateways.start(config)
    await double.push_message(chat, user, "draw a red square")
    await double.wait_for(lambda: bool(double.files_sent(chat.id)), 60, "the image")
    (photo,) = double.files_sent(chat.id)
    assert photo.file is not None
    assert (photo.file.method, photo.file.name, photo.file.mime) == ("sendPhoto", "image-1.png", "image/png")
    assert photo.file.data == drawn
    texts = [m.text for m in double.view(chat.id) if m.file is None]
    assert texts == ["Here is your red square."]
    assert double.view(chat.id)[-1] == photo  # after the reply, as an attached file
    assert model.requests[-1].body["modalities"] == ["image", "text"]


async def test_what_is_not_an_image_is_a_line_in_the_reply_and_nothing_else_is_lost(
    double: BotApiDouble, gateways: Gateways, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    user = User(802, "Bo")
    chat = private(user)
    good = png(32, 32, (0, 200, 0))
    images = (
        data_url(pdf("not a picture")),
        "data:image/png;base64,@@@",
        data_url(good),
        "https://cdn.example/x.png",
    )
    model.script(Reply("Three tries.", images=images))
    config = telegram_config(
        double, tmp_path, telegram={"allow_users": [str(user.id)]}, agent=agent_config(model)
    )
    await gateways.start(config)
    await double.push_message(chat, user, "draw")
    await double.wait_for(lambda: bool(double.files_sent(chat.id)), 60, "the one good image")
    (photo,) = double.files_sent(chat.id)
    assert photo.file is not None and photo.file.data == good
    (reply,) = [m.text for m in double.view(chat.id) if m.file is None]
    lines = reply.splitlines()
    assert lines[0] == "Three tries."
    assert lines[-1].startswith("[image 1 was not sent:") and "not an image" in lines[-1], reply
    assert len(double.files_sent(chat.id)) == 1  # the malformed and the remote one were never sent
