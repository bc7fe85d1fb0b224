"""Voice notes with the real engine, store and recogniser: a spoken phrase (espeak-ng, encoded to
OGG/Opus with PyAV) is decoded and transcribed once by the embedded PocketSphinx; the model reads
the transcript marked as one, the user is shown it, a re-run reads the recorded transcript, and a
corrupt or too long voice note is a clear note while the rest of the message is answered."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chatgate.domain.inbound import Attachment, Inbound
from chatgate.domain.turns import QueuedItem
from chatgate.domain.voice import VoiceSettings
from engine.test_media_fetch import FileAdapter, settings, with_files
from support.media_files import spoken_ogg

PHRASE = "one two three four five six seven eight nine ten"
"""Spoken by espeak-ng's en-us+f2 voice, PocketSphinx hears every word of it."""
WORDS = {"three", "five", "seven", "nine"}


def heard(text: str) -> set[str]:
    return set(text.lower().replace(":", " ").split())


async def test_a_voice_note_reaches_the_agent_as_its_transcript_once(make_harness, tmp_path):
    voice = spoken_ogg(PHRASE)
    adapter = FileAdapter({"v1": voice})
    h = await make_harness(adapter=adapter, media=settings(tmp_path))
    note = Attachment("voice", "v1", "audio/ogg", None, len(voice))
    await h.admission.admit(with_files(h.inbound("", chat_id="c1"), note))
    (final,) = await h.finals("c1", 1, timeout=120)
    (request,) = h.agent.requests()
    (line,) = [x for x in request.model_input.splitlines() if x.startswith("[transcript of the voice note")]
    assert line.startswith("[transcript of the voice note voice.ogg]: ")
    assert heard(line) >= WORDS
    assert "[transcript of the voice note voice.ogg]" in final  # the echo agent repeats what it read
    (notice,) = h.adapter.texts("c1", kinds=("notice",))
    assert notice.startswith("Transcript: ") and heard(notice) >= WORDS
    ((transcript,),) = h.query("SELECT transcript FROM media")
    assert heard(transcript) >= WORDS
    assert "its transcript is in the message" in (request.media[request.turn_media[0].sha].note or "")

    # a re-run of the turn reads the recorded transcript: nothing is fetched or transcribed again
    # (transcribing is part of a fetch that was not recorded yet)
    ((seq, inbound_json),) = h.query("SELECT seq, inbound_json FROM inbox")
    fetcher = h.runner._media
    again = await fetcher.fetch([QueuedItem(seq, "k", Inbound.from_dict(json.loads(inbound_json)), 2)])
    inbound = Inbound.from_dict(json.loads(inbound_json))
    assert again.notes(inbound) == (f"[transcript of the voice note voice.ogg]: {transcript}",)
    assert adapter.opened == ["v1"]


async def test_corrupt_and_too_long_voice_notes_are_notes_and_the_rest_is_answered(make_harness, tmp_path):
    voice = spoken_ogg(PHRASE)
    corrupt = voice[:200] + bytes(range(256)) * 40  # an Ogg header, then noise
    adapter = FileAdapter({"bad": corrupt, "long": voice, "txt": b"shopping list\n"})
    limits = settings(tmp_path, voice=VoiceSettings(max_seconds=1.0, show_transcript=False))
    h = await make_harness(adapter=adapter, media=limits)
    files = (
        Attachment("voice", "bad", "audio/ogg", None, None),
        Attachment("audio", "long", "audio/ogg", "memo.ogg", None),
        Attachment("document", "txt", None, "list.txt", None),
    )
    await h.admission.admit(with_files(h.inbound("my notes", chat_id="c1"), *files))
    (final,) = await h.finals("c1", 1, timeout=120)
    assert final.startswith("echo: my notes\nreceived voice.ogg (audio/ogg")
    assert "received list.txt (text/plain" in final
    assert "[voice note voice.ogg could not be transcribed: the audio could not be decoded" in final
    too_long = (
        "[voice note memo.ogg could not be transcribed: it is longer than 1 s (media.voice.max_seconds)]"
    )
    assert too_long in final
    notices = h.adapter.texts("c1", kinds=("notice",))
    assert len(notices) == 2 and too_long in notices
    assert any(n.startswith("[voice note voice.ogg could not be transcribed") for n in notices)


async def test_off_leaves_a_voice_note_untranscribed(make_harness, tmp_path):
    adapter = FileAdapter({"v1": spoken_ogg("hello")})
    off = settings(tmp_path, voice=VoiceSettings(transcription="off"))
    h = await make_harness(adapter=adapter, media=off)
    await h.admission.admit(with_files(h.inbound("", chat_id="c1"), Attachment("voice", "v1")))
    (final,) = await h.finals("c1", 1)
    assert "transcript" not in final and "received voice.ogg (audio/ogg" in final
    assert h.adapter.texts("c1", kinds=("notice",)) == []
    assert h.query("SELECT transcript, transcript_error FROM media") == [(None, None)]


def occupy(fetcher: Any) -> threading.Event:
    """Hold the voice notes' one thread with other work until the event is set: whatever voice
    note comes next waits its turn (as behind a long one)."""
    release = threading.Event()
    pool = fetcher._voice._pool or ThreadPoolExecutor(max_workers=1, thread_name_prefix="voice")
    fetcher._voice._pool = pool
    pool.submit(release.wait)
    return release


async def test_a_turn_cut_off_mid_transcription_records_nothing_and_transcribes_again(
    make_harness, wait, tmp_path
):
    adapter = FileAdapter({"v1": spoken_ogg(PHRASE)})
    h = await make_harness(adapter=adapter, media=settings(tmp_path))
    fetcher = h.runner._media
    inbound = with_files(h.inbound("", chat_id="c1"), Attachment("voice", "v1"))
    queued = QueuedItem(5000, "k", inbound, 1)
    release = occupy(fetcher)
    task = asyncio.create_task(fetcher.fetch([queued]))
    await wait(lambda: adapter.opened == ["v1"])
    await asyncio.sleep(0.05)  # the download is stored; the transcription waits for the thread
    task.cancel()  # the process dies here
    await asyncio.gather(task, return_exceptions=True)
    release.set()
    assert await h.store.media_record("5000:0") is None  # nothing recorded: the re-run starts over
    redone = await fetcher.fetch([queued])
    assert adapter.opened == ["v1", "v1"]
    (line,) = redone.notes(inbound)
    assert heard(line) >= WORDS


async def test_a_transcription_past_its_timeout_is_a_note(make_harness, tmp_path):
    adapter = FileAdapter({"v1": spoken_ogg("hello")})
    quick = settings(tmp_path, voice=VoiceSettings(timeout_seconds=0.2))
    h = await make_harness(adapter=adapter, media=quick)
    release = occupy(h.runner._media)
    try:
        await h.admission.admit(with_files(h.inbound("and this", chat_id="c1"), Attachment("voice", "v1")))
        (final,) = await h.finals("c1", 1)
    finally:
        release.set()
    assert "and this" in final
    assert "[voice note voice.ogg could not be transcribed: transcribing took longer than 0.2 s]" in final


def test_the_gateway_loads_neither_ffmpeg_nor_the_recogniser_until_a_voice_note_arrives() -> None:
    """PyAV (FFmpeg) and PocketSphinx are imported by the first voice note only."""
    probe = (
        "import sys, chatgate.app.gateway, chatgate.engine.pipeline, chatgate.engine.voice;"
        "print(sorted(m for m in ('av', 'pocketsphinx') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
