"""Images the model returned in a turn (``agents.base.ImageMade``): each is checked and stored like an
uploaded file (``MediaFetcher.take``: its type from its content, pixel and size limits, the blob
store) and sent after the reply as a file of its own, exactly as ``attach_file`` sends one.

A model's bytes are a stranger's: one that is not an image by its content, too large, or a
decompression bomb is not sent, and the reply says so in one line; the turn goes on.
"""

from __future__ import annotations

import logging
import mimetypes
from collections.abc import AsyncIterator

from chatgate.agents.base import ImageMade
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.media import MediaRefused
from chatgate.domain.outfiles import OutFile
from chatgate.engine.media_fetch import MediaFetcher

log = logging.getLogger(__name__)


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


class ModelImages:
    """One turn's images from the model, added to the files its reply sends (``files``)."""

    def __init__(
        self, media: MediaFetcher | None, platform: str, session_key: str, files: list[OutFile]
    ) -> None:
        self._media = media
        self._platform = platform
        self._session_key = session_key
        self._files = files
        self.taken = 0
        self.refusals: list[str] = []
        """One line per image not sent, for the reply's end (``note``)."""

    async def take(self, image: ImageMade) -> None:
        n = self.taken + len(self.refusals) + 1
        if self._media is None:
            self.refusals.append(f"[image {n} from the model was not sent: media is off (media.enabled)]")
            return
        try:
            item = await self._media.take(_once(image.data), self._platform, f"image-{n}")
        except (MediaRefused, StoreUnavailable) as exc:
            log.info("a model's image was not sent: %s", exc, extra={"session_key": self._session_key})
            self.refusals.append(f"[image {n} from the model was not sent: {exc}]")
            return
        if item.kind != "image":
            self.refusals.append(f"[image {n} from the model was not sent: it is {item.mime}, not an image]")
            return
        name = f"image-{n}{mimetypes.guess_extension(item.mime) or ''}"
        self._files.append(OutFile(item.sha, name, item.mime, item.size))
        self.taken += 1

    def note(self, text: str) -> str:
        """The reply's text, with a line for each image that was not sent."""
        if not self.refusals:
            return text
        return "\n\n".join([text.rstrip(), *self.refusals]) if text.strip() else "\n".join(self.refusals)
