"""Images made during a turn, by the model (``agents.base.ImageMade``) or returned by an MCP tool:
each is checked and stored like an uploaded file (``MediaFetcher.take``: its type from its content,
pixel and size limits, the blob store) and sent after the reply as a file of its own, exactly as
``attach_file`` sends one.

Their bytes are a stranger's: one that is not an image by its content, too large, or a
decompression bomb is not sent, and a line says why (the reply's end for the model's, the tool's
result for a tool's); the turn goes on.
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


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


class MadeImages:
    """One turn's images from one maker (``prefix``: ``image`` for the model's, ``tool-image`` for
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

    async def take(self, data: bytes) -> str:
        """The image stored and queued to send; a line saying what became of it."""
        self._made += 1
        label = f"{self._prefix} {self._made}"
        refused = await self._refusal(data, label)
        if refused is None:
            return f"[{label} is sent to the user after the reply as {self._files[-1].name}]"
        log.info("%s was not sent: %s", label, refused, extra={"session_key": self._session_key})
        line = f"[{label} was not sent: {refused}]"
        self.refusals.append(line)
        return line

    async def _refusal(self, data: bytes, label: str) -> str | None:
        if self._media is None:
            return "media is off (media.enabled)"
        try:
            item = await self._media.take(_once(data), self._platform, label.replace(" ", "-"))
        except (MediaRefused, StoreUnavailable) as exc:
            return str(exc)
        if item.kind != "image":
            return f"it is {item.mime}, not an image"
        name = f"{label.replace(' ', '-')}{mimetypes.guess_extension(item.mime) or ''}"
        self._files.append(OutFile(item.sha, name, item.mime, item.size))
        return None

    def note(self, text: str) -> str:
        """The reply's text, with a line for each image that was not sent."""
        if not self.refusals:
            return text
        return "\n\n".join([text.rstrip(), *self.refusals]) if text.strip() else "\n".join(self.refusals)
