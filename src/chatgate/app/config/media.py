"""The ``media`` section of the config: the bounds on the files a turn fetches (docs/media.md).

Its own module so the media feature's keys sit with their one consumer's types.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from chatgate.domain.media import (
    DEFAULT_HISTORY_FILES,
    DEFAULT_INLINE_CHARS,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_PIXELS,
    DEFAULT_QUOTA_MB,
    DEFAULT_RETENTION_DAYS,
    MediaLimits,
)
from chatgate.domain.voice import DEFAULT_MAX_SECONDS, TranscriptionMode, VoiceSettings
from chatgate.platforms.kit.section import Section


class VoiceOpenAIConfig(Section, kw_only=True):
    """``media.voice.openai``: an OpenAI-compatible ``/v1/audio/transcriptions`` endpoint."""

    base_url: str = "https://api.openai.com/v1"
    model: str = "whisper-1"
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the endpoint's API key (never the key itself)."""
    language: str | None = None
    """An ISO-639-1 hint (``en``, ``de``...); unset, the service detects the language."""


class VoiceConfig(Section, kw_only=True):
    """Voice notes and audio files: transcribed once, the transcript read by the model."""

    transcription: TranscriptionMode = "embedded"
    """``embedded`` (PocketSphinx, English, offline), ``openai`` (the endpoint below) or ``off``."""
    max_seconds: Annotated[float, msgspec.Meta(gt=0)] = DEFAULT_MAX_SECONDS
    """The longest voice note transcribed; a longer one is refused with a note."""
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    """Decoding and transcribing one voice note."""
    show_transcript: bool = True
    """Send the user what was heard, as a short reply to their voice note."""
    openai: VoiceOpenAIConfig = msgspec.field(default_factory=VoiceOpenAIConfig)

    def settings(self) -> VoiceSettings:
        return VoiceSettings(
            transcription=self.transcription,
            max_seconds=self.max_seconds,
            timeout_seconds=self.timeout_seconds,
            show_transcript=self.show_transcript,
            base_url=self.openai.base_url,
            model=self.openai.model,
            api_key_env=self.openai.api_key_env,
            language=self.openai.language,
        )


class MediaConfig(Section, kw_only=True):
    """Attachments: size, time and pixel bounds, and how much of a document the model reads."""

    enabled: bool = True
    """Fetch the files people send before the agent answers; off, the agent sees only the text."""
    max_bytes: Annotated[int, msgspec.Meta(ge=1)] = DEFAULT_MAX_BYTES
    """The largest file fetched, on every platform (bytes)."""
    platform_max_bytes: dict[str, int] = {}
    """Per platform name, a lower limit than ``max_bytes`` (a platform's own limit applies anyway)."""
    max_pixels: Annotated[int, msgspec.Meta(ge=1)] = DEFAULT_MAX_PIXELS
    """The most pixels an image may decode to (a decompression bomb claims far more)."""
    inline_chars: Annotated[int, msgspec.Meta(ge=0)] = DEFAULT_INLINE_CHARS
    """Characters of a text file's or a PDF's text the model reads; the rest is cut, and it is told."""
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    """How long one file's download may take."""
    history_files: Annotated[int, msgspec.Meta(ge=0)] = DEFAULT_HISTORY_FILES
    """The history's latest files the model is sent again each turn; older ones are named only."""
    voice: VoiceConfig = msgspec.field(default_factory=VoiceConfig)
    """How voice notes are transcribed (docs/media.md, "Voice notes")."""
    retention_days: Annotated[float, msgspec.Meta(ge=0)] = DEFAULT_RETENTION_DAYS
    """Files (their records and blobs) older than this many days are removed; 0 keeps them forever."""
    quota_mb_per_user: Annotated[float, msgspec.Meta(ge=0)] = DEFAULT_QUOTA_MB
    """The megabytes of files one user may have stored at once (what retention has not removed
    yet); a file past it is refused with a note. 0: no quota."""

    def limits(self) -> MediaLimits:
        return MediaLimits(
            max_bytes=self.max_bytes,
            platform_max_bytes=dict(self.platform_max_bytes),
            max_pixels=self.max_pixels,
            inline_chars=self.inline_chars,
            timeout_seconds=self.timeout_seconds,
            history_files=self.history_files,
            voice=self.voice.settings(),
            retention_days=self.retention_days,
            quota_bytes_per_user=int(self.quota_mb_per_user * 1_000_000),
        )
