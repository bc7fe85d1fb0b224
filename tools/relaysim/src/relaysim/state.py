"""What the simulator observes per gateway: the records tests read, and the result policy."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from relaysim.link import Link

ResultMode = Literal["ok", "never", "fail"]
RESULT_MODES: tuple[ResultMode, ...] = ("ok", "never", "fail")


@dataclass
class ReceivedOp:
    """One ``outbound`` frame as received, and the result sent for it (None until sent, or never)."""

    gateway_id: str
    request_id: str
    op: str | None
    action: dict[str, Any]
    platform: str | None
    bot_id: str | None
    connection: int
    received_at: float
    result: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SimMessage:
    """A message as the simulated platform shows it after sends, edits and deletes."""

    message_id: str
    platform: str
    chat_id: str
    content: str
    op: str
    edits: int = 0
    deleted: bool = False
    draft_id: int | None = None
    """Set for a message a ``draft`` op opened (a native stream)."""
    streaming: bool = False
    """A draft stream not sealed yet (``final`` not seen)."""
    rewrites: int = 0
    """Draft frames that were not a prefix-extension of the one before (should stay 0)."""
    media_kind: str | None = None
    source_url: str | None = None
    """A ``send_media`` message's file: its kind and the URL the connector fetched it from."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Delivery:
    """A buffered entry written to a gateway's socket (replayed or live)."""

    buffer_id: str
    connection: int
    replay: bool
    at: float


@dataclass(frozen=True)
class Interrupt:
    session_key: str
    reason: str | None
    connection: int
    at: float


@dataclass(frozen=True)
class Hello:
    platform: str
    bot_id: str | None
    command_manifest: list[Any] | None
    connection: int
    answered: bool


@dataclass
class Counters:
    connections: int = 0
    closes_4401: int = 0
    interrupts: int = 0
    going_idle: int = 0
    bad_frames: int = 0
    messages_in: int = 0
    """WebSocket text messages read from the gateway."""
    ack_messages: int = 0
    """Of those, the messages that completed at least one ``inbound_ack`` line."""
    acks_in: int = 0

    def to_json(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class ResultPolicy:
    mode: ResultMode = "ok"
    delay: float = 0.0


@dataclass
class GatewayState:
    """Everything the simulator knows about one gateway id; the buffer itself is in SQLite."""

    gateway_id: str
    link: Link | None = None
    idle: bool = False  # buffered-only since going_idle, until the next connection has replayed
    lose_acks: bool = False  # acks arriving now are dropped, as if the gateway died before sending them
    lost_acks: list[str] = field(default_factory=list)
    policy: ResultPolicy = field(default_factory=ResultPolicy)
    counters: Counters = field(default_factory=Counters)
    ops: list[ReceivedOp] = field(default_factory=list)
    messages: dict[str, SimMessage] = field(default_factory=dict)
    deliveries: list[Delivery] = field(default_factory=list)
    interrupts: list[Interrupt] = field(default_factory=list)
    hellos: list[Hello] = field(default_factory=list)
    bots: dict[str, str] = field(default_factory=dict)  # platform -> botId from the latest hello
