"""The ports through which files come in: an adapter that fetches the files its events name,
and the intake a platform that receives files itself hands them to."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, cast

from chatgate.domain.inbound import Attachment
from chatgate.domain.media import MediaItem


class MediaSource(Protocol):
    """An adapter that can fetch the files its events refer to (``Inbound.attachments``).

    ``open_attachment`` streams the file's bytes as they arrive (never whole in memory); the
    engine bounds its size and time. An attachment the platform no longer has (an expired
    link, a deleted file) raises ``MediaRefused`` with the reason a person reads."""

    def open_attachment(self, attachment: Attachment) -> AsyncIterator[bytes]: ...


class MediaIntake(Protocol):
    """Where a platform that receives files itself (the web chat's upload) hands one in: it is
    streamed, bounded, checked and stored (``MediaRefused`` says why not)."""

    async def take(self, chunks: AsyncIterator[bytes], platform: str, name: str) -> MediaItem: ...

    async def read_blob(self, sha: str) -> bytes | None:
        """A stored file's bytes (a download the platform serves itself: the web chat's); None if gone."""
        ...


def media_source(adapter: object | None) -> MediaSource | None:
    """The adapter as a ``MediaSource``, or None when it cannot fetch files (yet)."""
    if adapter is None or not callable(getattr(adapter, "open_attachment", None)):
        return None
    return cast(MediaSource, adapter)
