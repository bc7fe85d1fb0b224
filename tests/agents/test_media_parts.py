"""What the OpenAI-compatible model is sent for a message's files."""

from __future__ import annotations

import base64

from chatgate.agents.base import AgentRequest, TurnMessage
from chatgate.agents.openai_agent import _build_messages
from chatgate.domain.history import HistoryEntry
from chatgate.domain.media import MediaContent, MediaItem
from support.media_files import png

IMAGE = MediaItem("a" * 64, "image/png", 89, "photo.png")
DOC = MediaItem("b" * 64, "text/csv", 8, "data.csv")
VOICE = MediaItem("c" * 64, "audio/ogg", 900, "voice.ogg")


def request(*, history: tuple[HistoryEntry, ...] = ()) -> AgentRequest:
    data = png()
    return AgentRequest(
        system="sys",
        history=history,
        messages=(TurnMessage("see", media=(IMAGE, DOC, VOICE)),),
        model_input="see",
        session_key="k",
        media={
            IMAGE.sha: MediaContent(IMAGE, data=data),
            DOC.sha: MediaContent(DOC, text="a,b\n1,2\n"),
            VOICE.sha: MediaContent(VOICE, note="audio files are not read by the model yet"),
        },
    )


def test_a_vision_model_gets_the_image_bytes_as_a_data_url_and_the_text_inline() -> None:
    messages = _build_messages(request(), vision=True)
    content = messages[-1]["content"]
    assert isinstance(content, list)
    text, image = content
    assert text["type"] == "text"
    assert "[content of data.csv (text/csv, 8 B)]\na,b\n1,2\n" in text["text"]
    assert "voice.ogg (audio/ogg, 900 B): audio files are not read by the model yet" in text["text"]
    url = image["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == png()


def test_a_model_without_vision_gets_a_note_and_plain_string_content() -> None:
    content = _build_messages(request(), vision=False)[-1]["content"]
    assert isinstance(content, str)
    assert "[image photo.png (image/png, 89 B): this model cannot see images]" in content


def test_the_history_sends_its_files_again() -> None:
    history = (HistoryEntry("user", "earlier", (IMAGE,)), HistoryEntry("assistant", "nice"))
    messages = _build_messages(request(history=history), vision=True)
    assert isinstance(messages[1]["content"], list)
    assert messages[1]["content"][1]["type"] == "image_url"
