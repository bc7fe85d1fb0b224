"""The media role: what each attachment's fetch gave, and the content-addressed blobs.

Split from ``store_roles`` only for size; ``store_roles.ROLES`` lists it with the others, and
the contract suite covers it the same way. A blob is named by the sha256 of its bytes, so
writing one twice is harmless and two messages with the same file share it.
"""

from __future__ import annotations

from typing import Protocol

from chatgate.domain.media import BlobStream, MediaRecord


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

    async def open_blob(self, sha: str) -> BlobStream | None:
        """A blob as a stream of pieces (its size first); None when there is no such blob. A blob
        removed while it is read ends the stream with ``StoreUnavailable`` (never short bytes)."""
        ...

    async def media_usage(self, owner: str) -> int:
        """The bytes of the files recorded for ``owner`` (``MediaRecord.owner``): a user's quota."""
        ...

    async def expire_media(self, before: float) -> int:
        """Delete up to a batch of records made before ``before`` (retention); how many went.
        Their blobs stay until ``sweep_blobs`` finds them unreferenced."""
        ...

    async def sweep_blobs(self, before: float) -> int:
        """Delete up to a batch of blobs stored before ``before`` that no record names; how many.
        A blob stored again is young again; one a record names is never deleted."""
        ...

    async def shared_key(self, name: str) -> bytes:
        """A random secret made once under ``name`` and the same for every process of the store
        (a web upload's signing key): the first caller makes it, every later one reads it."""
        ...
