"""``delivery.rate_limits``: an operator's rate budget per platform, over the adapter's defaults.

An adapter declares its platform's documented limits (Telegram: one message a second per
chat, 20 a minute per group, 30 a second per bot); a bot with raised limits, or a
connector fronting a platform, sets them here. Every key is optional: a key left out
keeps the adapter's value. A platform name that is not served is a start-up error.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from chatgate.engine.ratelimit import RateOverride
from chatgate.platforms.kit.section import Section


class RateLimitsConfig(Section, kw_only=True):
    chat_interval_seconds: Annotated[float, msgspec.Meta(ge=0, le=3600)] | None = None
    """Least time between two messages to one chat."""
    per_second: Annotated[float, msgspec.Meta(ge=0, le=10_000)] | None = None
    """Calls per second across the platform (sends, edits, typing); 0 removes the limit."""
    group_per_minute: Annotated[int, msgspec.Meta(ge=0, le=100_000)] | None = None
    """Messages per minute to one group chat, where the adapter tells groups apart; 0 removes it."""

    def override(self) -> RateOverride:
        return RateOverride(self.chat_interval_seconds, self.per_second, self.group_per_minute)


def rate_limit_problem(limits: dict[str, RateLimitsConfig], served: list[str]) -> str | None:
    """The error naming the key, when a budget names a platform this gateway does not serve."""
    for name in limits:
        if name not in served:
            return (
                f"delivery.rate_limits.{name}: {name!r} is not a platform this gateway serves"
                f" ({', '.join(served) or 'none enabled'}); fix the name or enable the platform"
            )
    return None
