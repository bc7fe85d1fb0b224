"""Files sent to the bot on Telegram reach the model: through the real adapter (getFile, then the
file download) against the Bot API double, and the real OpenAI SDK against a fake model that
reads what it was sent. A SIGKILL mid-download: the file is fetched again, answered once."""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from telegram_double import TOKEN, TOKEN_ENV, BotApiDouble, Gateways, User, private, telegram_config

from agents.fake_openai_server import API_KEY, KEY_ENV, Answer, FakeOpenAIServer, agent_section
from chatgate.domain.media import human_size
from support.engine_harness import wait_until
from support.media_files import pdf, png, silent_mp4, spoken_mp4, spoken_ogg
from support.postgres import DSN, pg_schema_fixture, sql  # noqa: F401  (the pg_schema fixture)
from support.procs import GatewayProcess


def last_user_content(body: dict[str, Any]) -> Any:
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


def vision_model(body: dict[str, Any]) -> str:
    """The fake vision model: names the sha256 and size of every image it was sent, and the
    text it read."""
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


def agent_config(server: FakeOpenAIServer) -> dict[str, Any]:
    return agent_section(server, vision=True)


async def start_for(
    user: User, double: BotApiDouble, gateways: Gateways, model: FakeOpenAIServer, tmp_path: Path
) -> Any:
    """A real in-process gateway that lets ``user`` in, its agent the fake vision model."""
    config = telegram_config(
        double, tmp_path, telegram={"allow_users": [str(user.id)]}, agent=agent_config(model)
    )
    return await gateways.start(config)


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Any:
    server = FakeOpenAIServer()
    server.script(Answer(vision_model))
    server.start()
    monkeypatch.setenv(KEY_ENV, API_KEY)
    yield server
    server.stop()


async def test_a_photo_reaches_a_vision_model_as_its_bytes(
    double: BotApiDouble, gateways: Gateways, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    user = User(501, "Ada")
    chat = private(user)
    image = png(120, 80, (10, 120, 200))
    await start_for(user, double, gateways, model, tmp_path)
    await double.push_photo(chat, user, image, caption="what colour is this?")
    await double.wait_for(lambda: any("sha256=" in m.text for m in double.view(chat.id)), 60, "the answer")
    (answer,) = [m.text for m in double.view(chat.id)]
    assert (
        f"image data:image/png;base64 {len(image)} bytes sha256={hashlib.sha256(image).hexdigest()}" in answer
    )
    assert "what colour is this?" in answer and "[attached: photo.jpg (image/png" in answer
    assert [c[0] for c in double.calls if c[0] == "getFile"] == ["getFile"]
    assert len(double.downloads) == 1


async def test_a_pdf_reaches_the_model_as_its_text(
    double: BotApiDouble, gateways: Gateways, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    user = User(502, "Bo")
    chat = private(user)
    document = pdf("Quarterly revenue rose by 12 percent")
    await start_for(user, double, gateways, model, tmp_path)
    await double.push_document(chat, user, document, "../q3 report.pdf", "application/pdf")
    await double.wait_for(lambda: any("text:" in m.text for m in double.view(chat.id)), 60, "the answer")
    (answer,) = [m.text for m in double.view(chat.id)]
    assert "[content of q3 report.pdf (application/pdf" in answer
    assert "Quarterly revenue rose by 12 percent" in answer


async def test_an_expired_file_is_a_note_to_the_model_and_a_line_the_user_sees(
    double: BotApiDouble, gateways: Gateways, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    user = User(503, "Cy")
    chat = private(user)
    await start_for(user, double, gateways, model, tmp_path)
    _, _ = await double.push_photo(chat, user, png(), caption="still there?")
    double.files.clear()  # Telegram no longer has it
    await double.wait_for(lambda: len(double.view(chat.id)) == 2, 60, "the notice and the answer")
    notice, answer = [m.text for m in double.view(chat.id)]
    reason = "Telegram no longer has this file (it may have expired)"
    assert notice == f"[attachment photo.jpg was not received: {reason}]"
    assert "still there?" in answer and reason in answer


async def test_a_file_over_telegrams_20_mb_is_refused_by_getfile_and_never_downloaded(
    double: BotApiDouble, gateways: Gateways, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    user = User(506, "Flo")
    chat = private(user)
    await start_for(user, double, gateways, model, tmp_path)
    await double.push_document(
        chat, user, b"x" * (20 * 1024 * 1024 + 1), "huge.bin", "application/octet-stream"
    )
    await double.wait_for(lambda: len(double.view(chat.id)) == 2, 60, "the notice and the answer")
    notice = double.view(chat.id)[0].text
    assert (
        notice
        == "[attachment huge.bin was not received: Telegram lets a bot download files up to 20 MB only]"
    )
    assert double.downloads == []


async def test_on_postgresql_the_blob_is_rows_every_process_can_read(
    pg_schema: str, double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    """(``pg_schema`` first: it is dropped after the gateway stopped.)"""
    user = User(505, "Ed")
    chat = private(user)
    image = png(200, 150, (1, 2, 3))
    store = {"url": DSN, "postgres": {"schema": pg_schema}}
    config = telegram_config(double, tmp_path, telegram={"allow_users": [str(user.id)]}, store=store)
    await gateways.start(config)
    await double.push_photo(chat, user, image, caption="kept in the database")
    await double.wait_for(lambda: any("received" in m.text for m in double.view(chat.id)), 60, "the answer")
    sha = hashlib.sha256(image).hexdigest()
    rows = await sql(f'SELECT data FROM "{pg_schema}".media_chunks WHERE sha = $1 ORDER BY idx', sha)
    assert b"".join(r["data"] for r in rows) == image
    assert not (tmp_path / "state" / "blobs").exists() or not any((tmp_path / "state" / "blobs").glob("??/*"))


@pytest.mark.slow
@pytest.mark.timeout(200)  # two Telegram-enabled starts of a real gateway process
async def test_a_kill_mid_download_fetches_again_and_answers_once(
    double: BotApiDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    user = User(504, "Di")
    chat = private(user)
    config = {
        "agent": {"echo": {"chunk_delay_ms": 0}},
        "platforms": {
            "web": {"enabled": False},
            "telegram": {
                "enabled": True,
                "token_env": TOKEN_ENV,
                "allow_users": [str(user.id)],
                "api_base": double.base,
                "poll_timeout_seconds": 5,
            },
        },
        "locks": {"credential_dir": str(tmp_path / "locks")},
    }
    image = png(300, 200)
    gateway = GatewayProcess(tmp_path, config)
    double.hang_downloads = True
    await gateway.start()
    try:
        await double.push_photo(chat, user, image, caption="keep this")
        await double.wait_for(lambda: len(double.downloads) == 1, 90, "the download to start")
        await gateway.kill()
        double.hang_downloads = False
        await gateway.start()
        await double.wait_for(
            lambda: any("received photo.jpg" in m.text for m in double.view(chat.id)), 90, "the answer"
        )
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
    assert len(double.downloads) == 2  # fetched again after the kill
    assert os.listdir(tmp_path / "state" / "blobs" / "tmp") == []  # the killed download's part is gone
    answers = [m.text for m in double.view(chat.id) if "received photo.jpg" in m.text]
    assert answers == [f"echo: keep this\nreceived photo.jpg (image/png, {human_size(len(image))})"]


VOICE_PHRASE = "one two three four five six seven eight nine ten"
"""espeak-ng's en-us+f2 voice speaking it: PocketSphinx hears every word (tests/engine/test_voice.py)."""


def echo_model(body: dict[str, Any]) -> str:
    """A fake model that answers with the text of the user's message it read."""
    content = last_user_content(body)
    return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)


def assert_heard(texts: list[str], what: str) -> None:
    """The user saw the ``Transcript:`` notice, then the answer, and the model read the transcript
    of ``what`` (the echo model repeats it): the spoken numbers in both."""
    notice, answer = texts
    words = {"three", "five", "seven", "nine"}
    assert notice.startswith("Transcript: ") and set(notice.split()) >= words
    (line,) = [x for x in answer.splitlines() if x.startswith(f"[transcript of {what}]: ")]
    assert set(line.split()) >= words


async def test_a_voice_note_reaches_the_model_as_its_transcript(
    double: BotApiDouble, gateways: Gateways, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    """The embedded recogniser: a spoken phrase, sent as a Telegram voice note (OGG/Opus)."""
    user = User(507, "Gus")
    chat = private(user)
    model.script(Answer(echo_model))
    gateway = await start_for(user, double, gateways, model, tmp_path)
    await double.push_voice(chat, user, spoken_ogg(VOICE_PHRASE), duration=6)
    await double.wait_for(lambda: len(double.view(chat.id)) == 2, 120, "the transcript and the answer")
    voice_threads = [t for t in threading.enumerate() if t.name.startswith("voice")]
    assert voice_threads  # the voice notes' own thread, made by the first one
    await gateways.stop(gateway)
    await wait_until(lambda: not any(t.is_alive() for t in voice_threads), 30, "the voice thread to end")
    assert_heard([m.text for m in double.view(chat.id)], "the voice note voice.ogg")
    assert model.transcriptions == []  # embedded: the audio went nowhere


async def test_a_video_notes_sound_reaches_the_model_as_its_transcript(
    double: BotApiDouble, gateways: Gateways, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    """The embedded recogniser on the AAC sound track of an MP4 video note."""
    user = User(509, "Ida")
    chat = private(user)
    model.script(Answer(echo_model))
    await start_for(user, double, gateways, model, tmp_path)
    await double.push_video_note(chat, user, spoken_mp4(VOICE_PHRASE), duration=6)
    await double.wait_for(lambda: len(double.view(chat.id)) == 2, 120, "the transcript and the answer")
    assert_heard([m.text for m in double.view(chat.id)], "the video video.mp4")


async def test_a_silent_video_is_named_to_the_model_and_no_failure_is_reported(
    double: BotApiDouble, gateways: Gateways, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    user = User(510, "Jo")
    chat = private(user)
    model.script(Answer(echo_model))
    await start_for(user, double, gateways, model, tmp_path)
    await double.push_video_note(chat, user, silent_mp4())
    await double.wait_for(lambda: len(double.view(chat.id)) >= 1, 120, "the answer")
    (answer,) = [m.text for m in double.view(chat.id)]  # no transcript notice, no failure line
    assert (
        "video.mp4" in answer and "could not be transcribed" not in answer and "transcript of" not in answer
    )


async def test_a_voice_note_is_transcribed_by_an_openai_compatible_endpoint(
    double: BotApiDouble, gateways: Gateways, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    """``media.voice.transcription: openai``: the decoded audio is posted as a 16 kHz WAV."""
    user = User(508, "Hal")
    chat = private(user)
    model.script(Answer(echo_model))
    voice = {
        "transcription": "openai",
        "show_transcript": False,
        "openai": {
            "base_url": model.base_url,
            "model": "whisper-x",
            "api_key_env": KEY_ENV,
            "language": "en",
        },
    }
    config = telegram_config(
        double,
        tmp_path,
        telegram={"allow_users": [str(user.id)]},
        agent=agent_config(model),
        media={"voice": voice},
    )
    await gateways.start(config)
    await double.push_voice(chat, user, spoken_ogg(VOICE_PHRASE), duration=6, caption="listen")
    await double.wait_for(lambda: len(double.view(chat.id)) == 1, 120, "the answer")
    (answer,) = [m.text for m in double.view(chat.id)]
    (sent,) = model.transcriptions
    assert sent.fields["model"] == "whisper-x" and sent.fields["language"] == "en"
    assert sent.content_type == "audio/wav"
    heard = model.transcribe(sent.data)
    assert heard.startswith("a 16000 Hz 1-channel WAV of ")
    assert "listen" in answer and f"[transcript of the voice note voice.ogg]: {heard}" in answer


async def test_a_corrupt_voice_note_is_a_note_and_the_caption_is_answered(
    double: BotApiDouble, gateways: Gateways, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    user = User(509, "Ida")
    chat = private(user)
    model.script(Answer(echo_model))
    await start_for(user, double, gateways, model, tmp_path)
    corrupt = b"OggS" + bytes(range(256)) * 20
    await double.push_voice(chat, user, corrupt, caption="did you get it?")
    await double.wait_for(lambda: len(double.view(chat.id)) == 2, 120, "the note and the answer")
    notice, answer = [m.text for m in double.view(chat.id)]
    assert notice.startswith("[voice note voice.ogg could not be transcribed: the audio could not be decoded")
    assert "did you get it?" in answer and notice in answer


async def test_a_transcription_service_that_refuses_is_a_note_and_the_caption_is_answered(
    double: BotApiDouble,
    gateways: Gateways,
    model: FakeOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user = User(510, "Jo")
    chat = private(user)
    model.script(Answer(echo_model))
    monkeypatch.setenv("WRONG_TRANSCRIPTION_KEY", "sk-wrong")
    voice = {
        "transcription": "openai",
        "openai": {"base_url": model.base_url, "api_key_env": "WRONG_TRANSCRIPTION_KEY"},
    }
    config = telegram_config(
        double,
        tmp_path,
        telegram={"allow_users": [str(user.id)]},
        agent=agent_config(model),
        media={"voice": voice},
    )
    await gateways.start(config)
    await double.push_voice(chat, user, spoken_ogg("hello"), caption="are you there?")
    await double.wait_for(lambda: len(double.view(chat.id)) == 2, 120, "the note and the answer")
    notice, answer = [m.text for m in double.view(chat.id)]
    reason = "the transcription service answered HTTP 401"
    assert notice == f"[voice note voice.ogg could not be transcribed: {reason}]"
    assert "are you there?" in answer and notice in answer
