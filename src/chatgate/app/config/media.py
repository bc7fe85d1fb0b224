"""The ``media`` section of the config: the bounds on the files a turn fetches (docs/media.md).

Its own module so the media feature's keys sit with their one consumer's types.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

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


class VoiceOpenAIConfig(BaseModel):
    """``media.voice.openai``: an OpenAI-compatible ``/v1/audio/transcriptions`` endpoint."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = "https://api.openai.com/v1"
    model: str = "whisper-1"
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the endpoint's API key (never the key itself)."""
    language: str | None = None
    """An ISO-639-1 hint (``en``, ``de``...); unset, the service detects the language."""


class VoiceConfig(BaseModel):
    """Voice notes and audio files: transcribed once, the transcript read by the model."""

    model_config = ConfigDict(extra="forbid")

    transcription: TranscriptionMode = "embedded"
    """``embedded`` (PocketSphinx, English, offline), ``openai`` (the endpoint below) or ``off``."""
    max_seconds: float = Field(DEFAULT_MAX_SECONDS, gt=0)
    """The longest voice note transcribed; a longer one is refused with a note."""
    timeout_seconds: float = Field(300.0, gt=0)
    """Decoding and transcribing one voice note."""
    show_transcript: bool = True
    """Send the user what was heard, as a short reply to their voice note."""
    openai: VoiceOpenAIConfig = VoiceOpenAIConfig()

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


class MediaConfig(BaseModel):
    """Attachments: size, time and pixel bounds, and how much of a document the model reads."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Fetch the files people send before the agent answers; off, the agent sees only the text."""
    max_bytes: int = Field(DEFAULT_MAX_BYTES, ge=1)
    """The largest file fetched, on every platform (bytes)."""
    platform_max_bytes: dict[str, int] = {}
    """Per platform name, a lower limit than ``max_bytes`` (a platform's own limit applies anyway)."""
    max_pixels: int = Field(DEFAULT_MAX_PIXELS, ge=1)
    """The most pixels an image may decode to (a decompression bomb claims far more)."""
    inline_chars: int = Field(DEFAULT_INLINE_CHARS, ge=0)
    """Characters of a text file's or a PDF's text the model reads; the rest is cut, and it is told."""
    timeout_seconds: float = Field(60.0, gt=0)
    """How long one file's download may take."""
    history_files: int = Field(DEFAULT_HISTORY_FILES, ge=0)
    """The history's latest files the model is sent again each turn; older ones are named only."""
    voice: VoiceConfig = VoiceConfig()
    """How voice notes are transcribed (docs/media.md, "Voice notes")."""
    retention_days: float = Field(DEFAULT_RETENTION_DAYS, ge=0)
    """Files (their records and blobs) older than this many days are removed; 0 keeps them forever."""
    quota_mb_per_user: float = Field(DEFAULT_QUOTA_MB, ge=0)
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
