"""When the Discord lane is full: which channels' messages are left on Discord, and from where.

discord.py hands the lane each event from inside its frame reader, which cannot wait. When
the lane already holds its most (``lane.MAX_PENDING``), a new message is not kept in memory:
its channel is noted here with the id just before it, and the message stays on Discord.
Once the lane has drained to half, each noted channel gets one catch-up read
(``GET /channels/{id}/messages?after=``) in its queue. Until then the channel's later events
are not queued either, so its messages are still admitted in the order they were written;
whatever catch-up reads twice, the store recognizes by its delivery id.

What history cannot give back is counted as lost and logged: edits and deletions (history
shows a message as it reads now), interactions (Discord tells the user the app did not
respond), and the messages of channels beyond ``MAX_CHANNELS`` noted at once (the channel
book still reads those back at the next start).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)
MAX_CHANNELS = 10_000


class Overflow:
    def __init__(self) -> None:
        self._after: dict[str, str] = {}
        self.dropped = 0
        """Events not queued since the lane filled."""
        self.lost = 0
        """Of those, the ones catch-up cannot read back."""
        self._full = False

    def holds(self, channel: str) -> bool:
        """Whether the channel waits for its catch-up (its events are not queued until then)."""
        return channel in self._after

    def leave(self, channel: str, message_id: str) -> None:
        """A message left on Discord: its channel is read back from just before it."""
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
        """The channels to read back, oldest noted first, with the id to read after."""
        return list(self._after.items())

    def resumed(self, channel: str) -> None:
        """The channel's catch-up is queued: its later events queue behind it."""
        del self._after[channel]

    @property
    def full(self) -> bool:
        """Whether events were left since the lane filled (cleared by ``drained``)."""
        return self._full

    def drained(self) -> None:
        """Every noted channel's catch-up is queued: the episode is reported, once."""
        if self._full and not self._after:
            log.warning(
                "Discord intake drained: %d events were left on Discord while it was full; every"
                " channel among them is being read back, %d events (edits, deletions, interactions)"
                " could not be",
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
