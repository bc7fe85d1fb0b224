"""Files made during a turn, by the model (its images, ``agents.base.ImageMade``) or returned by
an MCP tool (images, audio, embedded binary resources): each is checked and stored like an uploaded
file (``MediaFetcher.take``: its type from its content, pixel and size limits, the blob store) and
sent after the reply as a file of its own, exactly as ``attach_file`` sends one.

Their bytes are a stranger's: an "image" that is not one by its content, audio that is not audio,
a file too large, an SVG or a decompression bomb is not sent, and a line says why (the reply's end
for the model's, the tool's result for a tool's); the turn goes on.
"""

from __future__ import annotations

import logging
import mimetypes
from collections.abc import AsyncIterator

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.media import MediaRefused
from chatgate.domain.outfiles import OutFile
from chatgate.engine.media_fetch import MediaFetcher

log = logging.getLogger(__name__)


_EXTENSIONS = {"audio/wav": ".wav", "audio/ogg": ".ogg"}
"""Where the standard table has none (``audio/wav``) or an odd one (``.oga``)."""


def _extension(mime: str) -> str:
    return _EXTENSIONS.get(mime) or mimetypes.guess_extension(mime) or ""


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


class MadeFiles:
    """One turn's files from one maker (``prefix``: ``image`` for the model's, ``tool-file`` for
    a tool's), added to the files its reply sends (``files``)."""

    def __init__(
        self, media: MediaFetcher | None, platform: str, session_key: str, files: list[OutFile], prefix: str
    ) -> None:
        self._media = media
        self._platform = platform
        self._session_key = session_key
        self._files = files
        self._prefix = prefix
        self._made = 0
        self.refusals: list[str] = []
        """One line per image not sent (``note``)."""

    async def take(self, data: bytes, kind: str = "image", name: str | None = None) -> str:
        """The file stored and queued to send; a line saying what became of it. ``kind``: what it
        must be by its content (``image``, ``audio``; ``file``: anything the checks pass)."""
        self._made += 1
        label = f"{self._prefix} {self._made}"
        refused = await self._refusal(data, label, kind, name)
        if refused is None:
            return f"[{label} is sent to the user after the reply as {self._files[-1].name}]"
        log.info("%s was not sent: %s", label, refused, extra={"session_key": self._session_key})
        line = f"[{label} was not sent: {refused}]"
        self.refusals.append(line)
        return line

    async def _refusal(self, data: bytes, label: str, kind: str, name: str | None) -> str | None:
        if self._media is None:
            return "media is off (media.enabled)"
        try:
            item = await self._media.take(_once(data), self._platform, name or label.replace(" ", "-"))
        except (MediaRefused, StoreUnavailable) as exc:
            return str(exc)
        if kind != "file" and item.kind != kind:
            return f"it is {item.mime}, not {'an image' if kind == 'image' else kind}"
        shown = item.name if name else f"{label.replace(' ', '-')}{_extension(item.mime)}"
        self._files.append(OutFile(item.sha, shown, item.mime, item.size))
        return None

    def note(self, text: str) -> str:
        """The reply's text, with a line for each image that was not sent."""
        if not self.refusals:
            return text
        return "\n\n".join([text.rstrip(), *self.refusals]) if text.strip() else "\n".join(self.refusals)
