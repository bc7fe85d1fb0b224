"""The media role: what each attachment's fetch gave, and the content-addressed blobs.

Split from ``store_roles`` only for size; ``store_roles.ROLES`` lists it with the others, and
the contract suite covers it the same way. A blob is named by the sha256 of its bytes, so
writing one twice is harmless and two messages with the same file share it.
"""

from __future__ import annotations

from typing import Protocol

from chatgate.domain.media import MediaRecord


class Media(Protocol):
    """Fetch outcomes by attachment key, and the blobs they point at."""

    async def media_record(self, key: str) -> MediaRecord | None:
        """The recorded outcome of the attachment ``key`` (``<inbox seq>:<index>``); None if never fetched."""
        ...

    async def record_media(self, record: MediaRecord, now: float) -> MediaRecord:
        """Record a fetch's outcome; the first one recorded for a key wins and is returned."""
        ...

    async def put_blob(self, sha: str, path: str) -> None:
        """Take the finished file at ``path`` (whose sha256 is ``sha``) into the blob store,
        durably, before returning; the file is consumed. A blob already stored is kept."""
        ...

    async def read_blob(self, sha: str) -> bytes | None:
        """A blob's bytes; None when there is no such blob."""
        ...
