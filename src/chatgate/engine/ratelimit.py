"""One rate budget per chat, shared by sends, edits and typing.

Every call to a platform asks the budget first. A platform's ``retry_after``
(HTTP 429, Telegram flood control) penalizes only the chat it names, so one
chat's penalty never stalls other chats or platforms. The budget only answers
"how long until this call may go"; callers decide whether to wait, skip (a
preview) or reschedule (an outbox row).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PlatformLimits:
    chat_min_interval: float = 0.0
    max_rate: float | None = None


class RateBudget:
    def __init__(self, max_chats: int = 100_000) -> None:
        self._limits: dict[str, PlatformLimits] = {}
        self._next_chat: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._next_platform: dict[str, float] = {}
        self._max_chats = max_chats

    def configure(self, platform: str, limits: PlatformLimits) -> None:
        self._limits[platform] = limits

    def delay(self, platform: str, chat_id: str, now: float | None = None) -> float:
        """Seconds until a call to this chat may go (0 when it may go now)."""
        now = time.monotonic() if now is None else now
        chat_at = self._next_chat.get((platform, chat_id), 0.0)
        platform_at = self._next_platform.get(platform, 0.0)
        return max(0.0, chat_at - now, platform_at - now)

    def take(self, platform: str, chat_id: str, now: float | None = None) -> None:
        """Record a call made now."""
        now = time.monotonic() if now is None else now
        limits = self._limits.get(platform, PlatformLimits())
        key = (platform, chat_id)
        self._next_chat[key] = max(self._next_chat.get(key, 0.0), now + limits.chat_min_interval)
        self._next_chat.move_to_end(key)
        if len(self._next_chat) > self._max_chats:
            self._next_chat.popitem(last=False)
        if limits.max_rate:
            start = max(self._next_platform.get(platform, 0.0), now)
            self._next_platform[platform] = start + 1.0 / limits.max_rate

    def penalize(self, platform: str, chat_id: str, seconds: float, now: float | None = None) -> None:
        """The platform said: not before ``seconds`` from now, for this chat."""
        now = time.monotonic() if now is None else now
        key = (platform, chat_id)
        self._next_chat[key] = max(self._next_chat.get(key, 0.0), now + seconds)
        self._next_chat.move_to_end(key)
