"""What the relay connection hands up to the hub, and how the hub pushes back."""

from __future__ import annotations

from chatgate.platforms.relay.frames import Descriptor, HubFrame
from chatgate.platforms.relay.wire import BadFrame


class FrameHandler:
    """What the connection hands up; the relay hub implements it."""

    def on_descriptor(self, descriptor: Descriptor) -> None: ...

    def on_frame(self, frame: HubFrame, line: str, received_at: float) -> None:
        """``line`` is the frame as it arrived (for the record of a delivery that is refused)."""

    def on_bad_frame(self, bad: BadFrame) -> None: ...

    def on_state(self) -> None: ...

    def is_full(self) -> bool:
        """``True`` while the handler cannot take another frame: the reader waits (``wait_room``)
        and so stops reading the socket until it can (backpressure, never a drop)."""
        return False

    async def wait_room(self) -> None: ...
