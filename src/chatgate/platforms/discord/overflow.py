"""When the Discord lane is full: which channels' messages are left on Discord, and from where.

discord.py hands the lane each event from inside its frame reader, which cannot wait. When
the lane already holds its most (``lane.MAX_PENDING``), a new message is not kept in memory:
its channel is noted here with the id just before it, and the message stays on Discord.
Once the lane has drained to half, each noted channel gets a catch-up read
(``GET /channels/{id}/messages?after=``) in its queue. The channel stays held until that read
has ended: its later messages are left on Discord too, and if any were, or the read stopped
part-way, the channel is read again from where the read got to. So a channel's messages are
admitted in the order they were written, and whatever is read twice, the store recognizes
by its delivery id.

What history cannot give back is counted as lost and logged: edits and deletions (history
shows a message as it reads now), interactions (Discord tells the user the app did not
respond), and the messages of channels beyond ``MAX_CHANNELS`` noted at once. A read that
fails part-way (Discord answering 5xx, a dropped connection) holds its channel again and is
tried again later; a channel Discord refuses to show (403, 404) has nothing to read.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)
MAX_CHANNELS = 10_000


class Overflow:
    def __init__(self) -> None:
        self._after: dict[str, str] = {}
        """Held channels, with the id to read after."""
        self._reading: set[str] = set()
        """Held channels whose read-back is queued or running."""
        self._left_meanwhile: set[str] = set()
        """Reading channels that had a message left on Discord during the read."""
        self.dropped = 0
        """Events not queued since the lane filled."""
        self.lost = 0
        """Of those, the ones catch-up cannot read back."""
        self._full = False

    def holds(self, channel: str) -> bool:
        """Whether the channel's new events wait for its read-back (they are not queued)."""
        return channel in self._after

    def leave(self, channel: str, message_id: str) -> None:
        """A message left on Discord: its channel is read back from just before it."""
        if channel in self._reading:
            self._left_meanwhile.add(channel)  # read again once this read ends
            return
        self._fill()
        if channel in self._after:
            return
        if not message_id.isdigit() or len(self._after) >= MAX_CHANNELS:
            self.lost += 1
            return
        self._after[channel] = str(int(message_id) - 1)

    def lose(self) -> None:
        """An event history cannot give back (an edit, a deletion, an interaction)."""
        self._fill()
        self.lost += 1

    def waiting(self) -> list[tuple[str, str]]:
        """The held channels whose read-back is not queued yet, oldest first."""
        return [(c, after) for c, after in self._after.items() if c not in self._reading]

    def reading(self, channel: str) -> None:
        """The channel's read-back is queued."""
        self._reading.add(channel)

    def read(self, channel: str, last: str, complete: bool) -> bool:
        """A read-back ended at ``last``; True when the channel is held to be read again (it
        stopped part-way, or messages were left meanwhile), False when it is released."""
        self._reading.discard(channel)
        again = not complete or channel in self._left_meanwhile
        self._left_meanwhile.discard(channel)
        if not again:
            self._after.pop(channel, None)
            return False
        if channel not in self._after and len(self._after) >= MAX_CHANNELS:
            self.lost += 1
            log.error("Discord channel %s: messages after %s could not be read back", channel, last)
            return False
        self._after[channel] = last
        return True

    @property
    def full(self) -> bool:
        """Whether the lane filled and not every held channel's read-back is queued yet."""
        return self._full

    def drained(self) -> None:
        """Every held channel's read-back is queued: the episode is reported, once."""
        if self._full and not self.waiting():
            log.warning(
                "Discord intake drained: %d events were left on Discord while it was full; their"
                " channels are being read back, and %d of them could not be (edits, deletions,"
                " interactions, channels beyond the cap)",
                self.dropped, self.lost, extra={"platform": "discord"},
            )  # fmt: skip
            self._full, self.dropped, self.lost = False, 0, 0

    def _fill(self) -> None:
        self.dropped += 1
        if not self._full:
            self._full = True
            log.warning(
                "Discord intake is full: new messages stay on Discord and each channel is read back"
                " once the queue drains; if this repeats, the store or the agent is too slow for"
                " this traffic",
                extra={"platform": "discord"},
            )
