"""The protocols through which platforms and the engine talk to each other."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from chatgate.domain.inbound import Inbound
from chatgate.domain.outbound import Capabilities, DeliveryResult
from chatgate.domain.source import Source
from chatgate.store.base import OutboxRow


class AdmissionRefused(Exception):
    """An inbound event that will not be admitted, with a code adapters can show."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Admitted:
    """Returned only after the event is durably committed: now the adapter may ack."""

    new: bool
    seq: int
    session_key: str


class InboundSink(Protocol):
    async def admit(self, inbound: Inbound) -> Admitted:
        """Commit ``inbound``; raises ``AdmissionRefused`` or ``StoreUnavailable``."""
        ...


@dataclass(frozen=True, slots=True)
class AdapterState:
    connected: bool
    detail: str = ""


class EditablePlatform(Protocol):
    """The message operations of a platform that can edit what it sent.

    Adapters with ``capabilities.edit`` implement these; the stream consumer uses
    them for previews and ``engine.finals.deliver_final`` for the durable final.
    """

    async def send_message(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult: ...

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult: ...

    async def send_typing(self, chat_id: str, target: Mapping[str, str]) -> None: ...

    async def delete_message(self, chat_id: str, message_id: str, target: Mapping[str, str]) -> bool:
        """Remove a message; ``False`` when the platform refused."""
        ...


class Adapter(Protocol):
    """One platform: decodes its events into ``Inbound`` and delivers outbox rows."""

    platform: str

    @property
    def capabilities(self) -> Capabilities:
        """Read per use: a relayed platform's limits arrive with the connector's descriptor."""
        ...

    async def deliver(self, row: OutboxRow) -> DeliveryResult: ...

    async def draft(self, source: Source, in_reply_to: str | None, text: str) -> None:
        """Show the reply so far (best effort; previews are not durable)."""
        ...

    def stop_intake(self) -> None:
        """Stop acknowledging new deliveries (shutdown); outbound keeps working."""
        ...

    def state(self) -> AdapterState:
        """Whether the adapter is connected to its platform, for /readyz and status."""
        ...
