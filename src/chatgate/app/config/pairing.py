"""The ``pairing`` section of the config: how long a code lives, and what bounds strangers.

Its own module so the pairing feature's keys sit with their one consumer's types; the
platform sections' ``pairing: true`` switches live with each platform in ``config.py``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from chatgate.domain.pairing import PairingLimits


class PairingConfig(BaseModel):
    """DM pairing limits, for every platform with ``pairing: true`` (docs/operations.md)."""

    model_config = ConfigDict(extra="forbid")

    code_ttl_seconds: float = Field(3600.0, gt=0)
    max_pending: int = Field(20, ge=1, le=1000)
    """Codes waiting for approval per platform; a stranger past that gets none."""
    reply_interval_seconds: float = Field(600.0, ge=0)
    """A stranger who keeps writing is sent their code again at most this often."""
    max_failed_approvals: int = Field(5, ge=1)
    lockout_seconds: float = Field(900.0, gt=0)
    """After max_failed_approvals wrong codes, ``chatgate pairing approve`` refuses every code this long."""

    def limits(self) -> PairingLimits:
        return PairingLimits(
            self.code_ttl_seconds,
            self.max_pending,
            self.reply_interval_seconds,
            self.max_failed_approvals,
            self.lockout_seconds,
        )
