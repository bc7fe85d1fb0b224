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
    MediaLimits,
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

    def limits(self) -> MediaLimits:
        return MediaLimits(
            max_bytes=self.max_bytes,
            platform_max_bytes=dict(self.platform_max_bytes),
            max_pixels=self.max_pixels,
            inline_chars=self.inline_chars,
            timeout_seconds=self.timeout_seconds,
            history_files=self.history_files,
        )
