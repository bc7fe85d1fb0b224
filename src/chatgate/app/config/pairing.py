"""The ``pairing`` section of the config: how long a code lives, and what bounds strangers.

Its own module so the pairing feature's keys sit with their one consumer's types; the
platform sections' ``pairing: true`` switches live with each platform in ``config.py``.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from chatgate.domain.pairing import PairingLimits
from chatgate.platforms.kit.section import Section


class PairingConfig(Section, kw_only=True):
    """DM pairing limits, for every platform with ``pairing: true`` (docs/operations.md)."""

    code_ttl_seconds: Annotated[float, msgspec.Meta(gt=0)] = 3600.0
    max_pending: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 20
    """Codes waiting for approval per platform; a stranger past that gets none."""
    reply_interval_seconds: Annotated[float, msgspec.Meta(ge=0)] = 600.0
    """A stranger who keeps writing is sent their code again at most this often."""
    max_failed_approvals: Annotated[int, msgspec.Meta(ge=1)] = 5
    lockout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 900.0
    """After max_failed_approvals wrong codes, ``chatgate pairing approve`` refuses every code this long."""

    def limits(self) -> PairingLimits:
        return PairingLimits(
            self.code_ttl_seconds,
            self.max_pending,
            self.reply_interval_seconds,
            self.max_failed_approvals,
            self.lockout_seconds,
        )
