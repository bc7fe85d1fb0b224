"""Per-user quotas (``media.quota_mb_per_user``): the bytes of a user's files still stored,
counted from the media records (``Media.media_usage``, both backends).

A file that would take its sender past the quota is refused like any file that did not come
through: a note to the agent and the same line to the user, naming the limit and what to do;
the rest of the message is answered. A download is bounded by what is left of the quota, so a
file past it is never stored whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec

from chatgate.domain.media import MediaLimits, MediaRefused, human_size
from chatgate.domain.source import Source
from chatgate.domain.store_roles import Media
from chatgate.engine.media_ingest import Ingested, TooLarge, ingest


def owner_of(source: Source) -> str | None:
    """Whose file a message's attachment is: ``<platform>:<user id>`` (None: no sender known)."""
    return f"{source.platform}:{source.user_id}" if source.user_id else None


class Limit(msgspec.Struct, frozen=True):
    """The most bytes one download may take, and the refusal when the quota is what binds."""

    most: int
    over_quota: str | None = None

    async def ingest(self, chunks: AsyncIterator[bytes], scratch: Path) -> Ingested:
        try:
            return await ingest(chunks, scratch, self.most)
        except TooLarge:
            if self.over_quota is not None:
                raise MediaRefused(self.over_quota) from None
            raise


class Quota:
    def __init__(self, store: Media, limits: MediaLimits) -> None:
        self._store = store
        self._quota = limits.quota_bytes_per_user
        self._days = limits.retention_days

    def _reason(self, used: int) -> str:
        after = f"files are removed after {self._days:g} days, " if self._days else ""
        return (
            f"your files may take {human_size(self._quota)} at most and already take {human_size(used)}"
            f" ({after}or ask the operator to raise media.quota_mb_per_user)"
        )

    async def refusal(self, owner: str | None, size: int) -> str | None:
        """Why a file of ``size`` bytes is over ``owner``'s quota; None when it fits (or no quota)."""
        if not self._quota or owner is None:
            return None
        used = await self._store.media_usage(owner)
        return self._reason(used) if used + size > self._quota else None

    async def limit(self, owner: str | None, most: int, claimed: int | None) -> Limit:
        """A download's bound: ``most`` (the platform's), or what is left of the quota when less;
        ``MediaRefused`` at once when nothing is left or the platform's claimed size is over it."""
        if not self._quota or owner is None:
            return Limit(most)
        used = await self._store.media_usage(owner)
        left = self._quota - used
        if left <= 0 or (claimed is not None and claimed > left):
            raise MediaRefused(self._reason(used))
        return Limit(left, self._reason(used)) if left < most else Limit(most)
