"""What adapters declare about themselves and report back about a delivery."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LengthUnit = Literal["chars", "utf16"]


@dataclass(frozen=True, slots=True)
class Capabilities:
    edit: bool = False
    drafts: bool = False
    buttons: bool = False
    threads: bool = False
    max_length: int = 4096
    length_unit: LengthUnit = "chars"
    markdown: str = "plain"
    confirms_receipt: bool = False
    """The client confirms each final it displayed (so unconfirmed ones are re-sent)."""


@dataclass(frozen=True, slots=True)
class Delivered:
    platform_message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Deferred:
    """No route to the chat right now (client offline); try again later."""

    reason: str
    retry_in: float = 60.0


@dataclass(frozen=True, slots=True)
class RetryLater:
    """The platform asked us to slow down, or a transient error happened."""

    reason: str
    retry_after: float


@dataclass(frozen=True, slots=True)
class Rejected:
    """The platform refused this message for good."""

    reason: str


DeliveryResult = Delivered | Deferred | RetryLater | Rejected
