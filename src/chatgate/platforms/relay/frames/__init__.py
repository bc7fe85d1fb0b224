"""Every relay frame as a typed model: what the connector sends us, and what we send it.

Incoming frames are one discriminated union on ``type`` (``Incoming``), validated
straight from the line (``wire.parse_frame``). Unknown fields are ignored
everywhere (the contract's forward compatibility). Field names are the wire's
(``bufferId``, ``requestId``, ...), so a validation error names the field as the
connector wrote it and ``describe`` turns it into a ``BadFrame`` reason.

Where the gateway is lenient on the wire it stays lenient here, with a
validator per rule rather than ``.get`` and ``isinstance`` at each read: a
``bufferId`` is a non-empty string or integer, else there is none; a result's
``retry_after`` outside 0 to 3600 seconds is no hint; media metadata, a quoted
message or a ``message_type`` of another shape are left out. What the gateway
cannot do without (a source's platform and chat, ids that are strings or
integers, text within the limit) refuses the frame, with the field named.
Outgoing frames are built from models too and encoded by ``wire.encode``;
fields left ``None`` are not sent.
"""

from chatgate.platforms.relay.frames.incoming import (
    CONTRACT_VERSION,
    INTAKE_TYPES,
    LEGACY_OPS,
    MAX_BODY_B64,
    BufferId,
    Descriptor,
    DescriptorFrame,
    Forward,
    GoingIdleAckFrame,
    HubFrame,
    InboundEvent,
    InboundFrame,
    Incoming,
    IntakeFrame,
    InterruptInboundFrame,
    Label,
    LooseInt,
    LooseLabel,
    LooseObject,
    LooseStr,
    Media,
    NonEmptyStr,
    OutboundResultFrame,
    PassthroughFrame,
    RequiredLabel,
    Result,
    SessionSource,
    describe,
    read_buffer_id,
)
from chatgate.platforms.relay.frames.outgoing import (
    Action,
    DeleteAction,
    DraftAction,
    EditAction,
    FollowUpAction,
    GoingIdleFrame,
    HelloFrame,
    InboundAckFrame,
    InterruptFrame,
    Metadata,
    OutboundFrame,
    Outgoing,
    PromptAction,
    PromptOption,
    SendAction,
    SendMediaAction,
    TaskCardAction,
    TaskCardStopAction,
    TaskChunk,
    TypingAction,
)

__all__ = [
    "CONTRACT_VERSION",
    "INTAKE_TYPES",
    "LEGACY_OPS",
    "MAX_BODY_B64",
    "Action",
    "BufferId",
    "DeleteAction",
    "Descriptor",
    "DescriptorFrame",
    "DraftAction",
    "EditAction",
    "FollowUpAction",
    "Forward",
    "GoingIdleAckFrame",
    "GoingIdleFrame",
    "HelloFrame",
    "HubFrame",
    "InboundAckFrame",
    "InboundEvent",
    "InboundFrame",
    "Incoming",
    "IntakeFrame",
    "InterruptFrame",
    "InterruptInboundFrame",
    "Label",
    "LooseInt",
    "LooseLabel",
    "LooseObject",
    "LooseStr",
    "Media",
    "Metadata",
    "NonEmptyStr",
    "OutboundFrame",
    "OutboundResultFrame",
    "Outgoing",
    "PassthroughFrame",
    "PromptAction",
    "PromptOption",
    "RequiredLabel",
    "Result",
    "SendAction",
    "SendMediaAction",
    "SessionSource",
    "TaskCardAction",
    "TaskCardStopAction",
    "TaskChunk",
    "TypingAction",
    "describe",
    "read_buffer_id",
]
