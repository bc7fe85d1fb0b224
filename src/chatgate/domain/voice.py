"""Voice notes: how they are transcribed (``media.voice``) and how a transcript reads (no I/O here).

A voice note (or any audio file) that came through is decoded to 16 kHz mono PCM and
transcribed once, at fetch time; the transcript is kept with the attachment's record. The model
reads it as the message's text behind a marker saying it is a transcript of a voice note (the
recogniser can be wrong, and the model should know the words were heard, not typed); the user
may see it too, as a short notice quoting their voice note.
"""

from __future__ import annotations

from typing import Literal

import msgspec

TranscriptionMode = Literal["embedded", "openai", "off"]

DEFAULT_MAX_SECONDS = 300.0
"""The longest voice note transcribed (five minutes: about 9.6 MB of 16 kHz PCM)."""
SAMPLE_RATE = 16_000
"""What both recognisers take: 16 kHz, mono, 16-bit little-endian samples."""


class VoiceSettings(msgspec.Struct, frozen=True):
    """``media.voice``: which recogniser, and its bounds."""

    transcription: TranscriptionMode = "embedded"
    max_seconds: float = DEFAULT_MAX_SECONDS
    timeout_seconds: float = 300.0
    """Decoding and transcribing one voice note, together."""
    show_transcript: bool = True
    """Send the user a short notice quoting the transcript, as a reply to their voice note."""
    base_url: str = "https://api.openai.com/v1"
    model: str = "whisper-1"
    api_key_env: str = "OPENAI_API_KEY"
    language: str | None = None
    """An ISO-639-1 hint for the ``openai`` endpoint (the embedded model is English only)."""


def heard(kind: str) -> str:
    """What a transcribed file is called: a video's sound track, or a voice note (any audio)."""
    return "video" if kind == "video" else "voice note"


def transcript_line(name: str, transcript: str, what: str = "voice note") -> str:
    """How the model reads a voice note (or a video's sound): marked as a transcript, then the words."""
    words = transcript.strip() or "(no words recognised)"
    return f"[transcript of the {what} {name}]: {words}"


def untranscribed_note(name: str, reason: str, what: str = "voice note") -> str:
    """The line the model reads and the user sees when a voice note (a video) could not be transcribed."""
    return f"[{what} {name} could not be transcribed: {reason}]"


def transcript_notice(transcript: str) -> str:
    """The user's copy of what was heard (a reply to their voice note)."""
    words = transcript.strip() or "(no words recognised)"
    return f"Transcript: {words}"
