"""What a platform's decoder answers for an event that is not for the agent, by design."""

from __future__ import annotations

import msgspec


class Skipped(msgspec.Struct, frozen=True):
    """Not for the agent (the bot's own message, a channel it does not answer in, an event it
    does not need): acknowledge it, log it at debug, record nothing. A payload the gateway
    cannot read is an ``Undecodable`` (``engine/ports.py``) instead: recorded with its reason."""

    reason: str
