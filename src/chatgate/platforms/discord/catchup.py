"""What catch-up needs to survive a restart: the last admitted message id of each channel.

A fresh IDENTIFY (every process start) replays nothing, so the adapter reads the REST history
of each channel after the last message it admitted there. Those ids are kept in one
``Cursors`` entry (``discord:<bot id>:channels``, a JSON object channel id -> message id).
Writing it may lag behind admission: a channel read again from an older id finds only
messages that are admitted already, which the store recognizes by delivery id. A Discord id
carries its time, so "a channel with a session active in the last ``catch_up_hours``" is a
channel whose last admitted id is that recent; older ones are dropped from the entry, and at
most ``MAX_CHANNELS`` (the most recent) are kept.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from chatgate.domain.errors import PlatformCallError, StoreError
from chatgate.domain.store_roles import Cursors
from chatgate.platforms.discord.rest import ApiRefused, DiscordRest, RateLimited

log = logging.getLogger(__name__)
DISCORD_EPOCH_MS = 1_420_070_400_000
MAX_CHANNELS = 2000


def snowflake_time(ident: str) -> float:
    """The Unix time a Discord id was made."""
    return ((int(ident) >> 22) + DISCORD_EPOCH_MS) / 1000.0


def _later(a: str, b: str | None) -> bool:
    return b is None or int(a) > int(b)


class ChannelBook:
    def __init__(self, cursors: Cursors, name: str, keep_hours: float) -> None:
        self._cursors = cursors
        self.name = name
        self._keep = keep_hours * 3600.0
        self._last: dict[str, str] = {}
        self._dirty = False
        self._unsaved: set[str] = set()
        """Channels noted for the first time since the last flush."""

    async def load(self) -> None:
        raw = await self._cursors.get_cursor(self.name)
        try:
            found = json.loads(raw) if raw else {}
        except ValueError:
            log.warning("the Discord catch-up record %s is not JSON; starting without it", self.name)
            found = {}
        if isinstance(found, dict):
            self._last = {str(k): str(v) for k, v in found.items() if str(v).isdigit()}

    @property
    def reads_back(self) -> bool:
        """Whether a restart reads channels back at all (``catch_up_hours`` above 0)."""
        return self._keep > 0

    def knows(self, channel_id: str) -> bool:
        return channel_id in self._last

    async def start_channel(self, channel_id: str, message_id: str) -> None:
        """Before a channel's first admission: from now on it is read back after downtime,
        from just before this message (so a crash before the next flush loses nothing)."""
        if message_id.isdigit() and not self.knows(channel_id):
            self.note(channel_id, str(int(message_id) - 1))
        if channel_id in self._unsaved:  # noted when its message was queued: saved before it is admitted
            await self.flush()

    def note(self, channel_id: str, message_id: str) -> None:
        """``message_id`` was admitted in ``channel_id`` (ids that are not snowflakes are ignored)."""
        if message_id.isdigit() and _later(message_id, self._last.get(channel_id)):
            if channel_id not in self._last:
                self._unsaved.add(channel_id)
            self._last[channel_id] = message_id
            self._dirty = True

    def recent(self, now: float | None = None) -> list[tuple[str, str]]:
        """(channel, last admitted id) of the channels active within ``catch_up_hours``."""
        since = (time.time() if now is None else now) - self._keep
        return [(c, m) for c, m in self._last.items() if snowflake_time(m) >= since]

    async def flush(self) -> None:
        if not self._dirty:
            return
        kept = sorted(self.recent(), key=lambda item: int(item[1]), reverse=True)[:MAX_CHANNELS]
        self._last = dict(kept)
        self._dirty = False
        # No yield from here until ``set_cursor`` has queued its write: a message of a channel
        # this saves, once ``start_channel`` no longer sees it unsaved, is queued after it.
        saving, self._unsaved = self._unsaved, set()
        try:
            # A new channel's entry is durable: a power cut must not take it with the channel's
            # messages, whose admissions rely on it (they commit without an fsync of their own).
            await self._cursors.set_cursor(
                self.name, json.dumps(self._last, sort_keys=True), durable=bool(saving)
            )
        except StoreError as exc:
            self._unsaved |= saving
            self._dirty = True  # written again at the next flush; meanwhile catch-up would re-read more
            log.warning("could not save the Discord catch-up record: %s", exc)


async def read_history(
    rest: DiscordRest, channel_id: str, after: str, limit: int
) -> list[dict[str, Any]] | None:
    """One page of the channel's messages after ``after``; ``None`` when it could not be read."""
    for _ in range(5):
        try:
            page = await rest.call(
                "GET", f"/channels/{channel_id}/messages", query={"after": after, "limit": str(limit)}
            )
        except RateLimited as exc:
            await asyncio.sleep(min(exc.retry_after, 30.0))
            continue
        except ApiRefused as exc:  # no access, no channel: there is nothing to read, now or later
            log.warning("catch-up of Discord channel %s: Discord refused the read: %s", channel_id, exc)
            return []
        except PlatformCallError as exc:
            log.warning("catch-up of Discord channel %s stopped, to be tried again: %s", channel_id, exc)
            return None
        if not isinstance(page, list):
            return []
        return [m for m in page if isinstance(m, dict) and str(m.get("id", "")).isdigit()]
    log.warning("catch-up of Discord channel %s stopped: rate limited five times in a row", channel_id)
    return None
