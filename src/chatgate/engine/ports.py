"""The protocols through which platforms and the engine talk to each other.

This is the only engine module an adapter may import (see ``[tool.importlinter]``):
besides the protocols it holds ``deliver_final``, the one code path that puts a final
on an ``EditablePlatform``, because every editable adapter needs it and it belongs to
that port's contract.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, cast, runtime_checkable

import msgspec

from chatgate.domain.inbound import Inbound
from chatgate.domain.media_ports import MediaIntake
from chatgate.domain.outbound import (
    PREVIEW_KEY,
    Capabilities,
    Delivered,
    DeliveryResult,
    Rejected,
    TaskProgress,
)
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.profiles import Profiles
from chatgate.domain.prompts import Prompt, PromptResolution
from chatgate.domain.source import Source
from chatgate.domain.store_roles import (
    Accounts,
    ApiKeys,
    ApprovalReads,
    Cursors,
    Exchanges,
    OutboxConfirmations,
    SessionProfiles,
    WebChats,
)


class AnswerFeedback(msgspec.Struct, frozen=True):
    """What an approval answer did, for the adapter to show to the person who answered.

    ``won`` is true only when this answer was the one recorded; then every view of the
    prompt is updated through ``PromptingPlatform.resolve_prompt`` as well. When it is
    false the prompt was already answered or expired, ``outcome`` is what was recorded
    and ``text`` says so ("Expired — not run", "Already answered: ..."): show it to this
    person only (an ephemeral reply, a callback toast, a frame on their connection).
    """

    prompt_id: str
    won: bool
    outcome: str
    text: str


class Admitted(msgspec.Struct, frozen=True):
    """Returned only after the event is durably committed: now the adapter may ack."""

    new: bool
    seq: int
    session_key: str
    answer: AnswerFeedback | None = None
    """Set for a new approval answer (a button or ``/approve``/``/deny``)."""


class Undecodable(msgspec.Struct, frozen=True):
    """A delivery an adapter could not turn into an ``Inbound`` (a payload shape we do not
    support, a malformed body): recorded with its reason, then acknowledged, never guessed at."""

    transport: str
    reason: str
    delivery_id: str | None = None
    excerpt: str = ""
    platform: str = ""


class Refused(msgspec.Struct, frozen=True):
    """Will never be admitted (unauthorized, invalid, unsupported): acknowledge it upstream, so it
    is not redelivered, and tell the sender ``message`` where the platform can."""

    code: str
    message: str


class Unavailable(msgspec.Struct, frozen=True):
    """Not committed (the store is down, or the gateway is stopping): do NOT acknowledge; the
    upstream redelivers it (a web client resends, Telegram refetches, the relay replays)."""

    reason: str


IntakeAnswer = Admitted | Refused | Unavailable
"""``Admitted`` (new, or a recognized redelivery: ``new`` is false) may be acknowledged."""

WAIT_BRIEFLY = 0.5
"""Patience of a lane whose sender asks again when it gets no acknowledgement (a person who
is shown the error, a poller that refetches): enough to ride out a blip, no more."""
WAIT_UNTIL_STOPPED = float("inf")
"""Patience of a lane that cannot be asked again before a reconnect (and keeps its order)."""


class Intake(Protocol):
    """The one way into the gateway: every adapter hands each decoded event (or its decode
    failure) here, and acknowledges upstream according to the answer."""

    async def submit(self, event: Inbound | Undecodable, *, patience: float = WAIT_BRIEFLY) -> IntakeAnswer:
        """Admit ``event``. A storage outage is retried with backoff for up to ``patience``
        seconds, then answered ``Unavailable``; a decode failure is recorded and ``Refused``."""
        ...

    async def settle(self) -> bool:
        """Whether every event admitted so far is on the disk: a lane that marks its events
        ``replayable`` (the platform redelivers them until acknowledged) acknowledges them
        only once this says ``True``."""
        ...


class AdapterState(msgspec.Struct, frozen=True):
    connected: bool
    detail: str = ""


class EditablePlatform(Protocol):
    """The message operations of a platform that can edit what it sent.

    Adapters with ``capabilities.edit`` implement these; the stream consumer uses
    them for previews and ``deliver_final`` (below) for the durable final.
    """

    async def send_message(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult: ...

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult: ...

    async def send_typing(self, chat_id: str, target: Mapping[str, str]) -> DeliveryResult | None:
        """Best effort; a ``RetryLater`` with a scope is a rate limit the budget then honours."""
        ...

    async def delete_message(self, chat_id: str, message_id: str, target: Mapping[str, str]) -> bool:
        """Remove a message; ``False`` when the platform refused."""
        ...


@runtime_checkable
class TypingTargets(Protocol):
    """An editable platform that can show typing only in some targets (Slack: an assistant
    thread). The typist asks first, so an indicator that would be no call books no rate slot
    (a booked slot no call uses is idle platform time for every reply behind it)."""

    def can_type(self, chat_id: str, target: Mapping[str, str]) -> bool: ...


class StreamingPlatform(Protocol):
    """A platform that streams a reply into one message (``capabilities.native_stream``).

    The stream consumer opens the stream with the reply so far and then hands it the whole
    reply so far at each interval (prefix-stable, never a cursor); the adapter appends what
    is new. The stream's message id is the preview's, so the final row's
    ``EditablePlatform.edit_message`` of it (``deliver_final``) is what seals the stream
    with the true final text; a seal the platform refuses is ``Rejected``, and
    ``deliver_final`` then sends the final as a plain message (it is never lost).
    """

    async def start_stream(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult: ...

    async def append_stream(
        self, chat_id: str, stream_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult: ...


def native_streaming(adapter: object) -> StreamingPlatform | None:
    """The adapter as a streaming platform, or None (then previews are edits with a cursor)."""
    caps = getattr(adapter, "capabilities", None)
    if caps is None or not getattr(caps, "native_stream", False) or not getattr(caps, "edit", False):
        return None
    if not callable(getattr(adapter, "start_stream", None)) or not callable(
        getattr(adapter, "append_stream", None)
    ):
        return None
    return cast(StreamingPlatform, adapter)


class TaskCardPlatform(Protocol):
    """A platform that shows a turn's tool calls as a live card (the relay's ``task_card``).

    The stream consumer calls ``show_tasks`` with every task of the turn so far whenever one
    starts or ends, and ``stop_tasks`` with the same ``card_id`` once the turn is over,
    whatever its outcome. Both are best effort: a card is never the reply. An adapter that
    cannot show one for this chat answers ``None``.
    """

    async def show_tasks(
        self, chat_id: str, card_id: str, tasks: tuple[TaskProgress, ...], target: Mapping[str, str]
    ) -> DeliveryResult | None: ...

    async def stop_tasks(
        self, chat_id: str, card_id: str, target: Mapping[str, str]
    ) -> DeliveryResult | None: ...


def task_cards(adapter: object) -> TaskCardPlatform | None:
    """The adapter as a task-card platform, or None."""
    if not callable(getattr(adapter, "show_tasks", None)) or not callable(
        getattr(adapter, "stop_tasks", None)
    ):
        return None
    return cast(TaskCardPlatform, adapter)


def marked_text(row: OutboxRow, duplicate_marker: str) -> str:
    """A row's text as sent anew: a resend after an ambiguous send says it may be a repeat."""
    return f"{duplicate_marker}{row.text}" if row.possibly_duplicate and duplicate_marker else row.text


async def resolve_prompt_by_edit(
    platform: EditablePlatform,
    chat_id: str,
    prompt: Prompt,
    resolution: PromptResolution,
    target: Mapping[str, str],
) -> DeliveryResult:
    """``PromptingPlatform.resolve_prompt`` for a platform that edits: the prompt message becomes
    its recorded outcome (an edit without buttons drops them); a prompt never shown is sent."""
    if prompt.message_id is None:
        return await platform.send_message(chat_id, resolution.text, target, None)
    return await platform.edit_message(chat_id, prompt.message_id, resolution.text, target)


async def deliver_final(platform: EditablePlatform, row: OutboxRow, duplicate_marker: str) -> DeliveryResult:
    """The one code path that puts a final on an editable platform.

    A final row may carry the streamed preview's message id: then the final edits
    that message (removing the cursor), and a new message is sent only when no
    editable message exists. A final counts as delivered only when the platform
    acknowledged the operation that carried exactly the final text.
    """
    target = {k: str(v) for k, v in row.target.items() if k != PREVIEW_KEY}
    preview = row.target.get(PREVIEW_KEY)
    if preview:
        edited = await platform.edit_message(row.chat_id, str(preview), row.text, target)
        if not isinstance(edited, Rejected):
            # Delivered, or retry/ambiguous: an edit is idempotent, so retrying it is always safe.
            return Delivered(str(preview)) if isinstance(edited, Delivered) else edited
        # The preview cannot be edited (deleted, too old): the final becomes a new message.
    sent = await platform.send_message(
        row.chat_id, marked_text(row, duplicate_marker), target, row.in_reply_to
    )
    if preview and isinstance(sent, Delivered):
        # The stranded preview still shows a cursor; take it away (best effort).
        with contextlib.suppress(Exception):
            await platform.delete_message(row.chat_id, str(preview), target)
    return sent


class PromptingPlatform(Protocol):
    """An adapter that shows approval prompts with native buttons.

    Implemented by adapters whose ``capabilities.buttons`` is true; the engine uses it
    only then (otherwise the prompt is a plain-text outbox message naming ``/approve``
    and ``/deny``). A button press comes back as an ``Inbound`` of kind ``button`` with
    ``payload["prompt_response"] = {"prompt_id": ..., "option_id": ...}`` (a button's
    token is ``prompt.token(option.id)``: ``hp1:<prompt_id>:<option_id>``, at most 64
    bytes). Prompts are not outbox rows: the durable record is the approval itself.
    """

    async def send_prompt(self, chat_id: str, prompt: Prompt, target: Mapping[str, str]) -> DeliveryResult:
        """Show the prompt with one button per option. ``Delivered(message_id)`` names the
        platform message (kept for ``resolve_prompt``); anything else makes the engine
        fall back to the plain-text prompt through the outbox."""
        ...

    async def resolve_prompt(
        self, chat_id: str, prompt: Prompt, resolution: PromptResolution, target: Mapping[str, str]
    ) -> DeliveryResult:
        """Show how the prompt ended (``resolution.text``, the recorded outcome) and
        remove its buttons. Best effort: the outcome is already recorded."""
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

    async def start(self) -> None:
        """Begin intake (poll, dial, listen); called once the store is open and the engine runs."""
        ...

    def stop_intake(self) -> None:
        """Stop acknowledging new deliveries (shutdown); outbound keeps working."""
        ...

    async def aclose(self, budget: float) -> None:
        """After the outbox flush: end intake and outbound, release connections, within ``budget``
        seconds. Idempotent (adapters that share one connection close it once), and also called
        after a ``start`` that raised part-way: it closes whatever that start had opened."""
        ...

    def state(self) -> AdapterState:
        """Whether the adapter is connected to its platform, for /readyz and status."""
        ...


class GroupedChats(Protocol):
    """An adapter whose platform limits group chats apart (``capabilities.group_max_per_minute``)."""

    def is_group_chat(self, chat_id: str) -> bool:
        """True for a chat the platform's per-group limit applies to."""
        ...


def group_classifier(adapter: Adapter) -> Callable[[str], bool] | None:
    """The adapter's ``is_group_chat``, or None when it does not classify its chats."""
    method = getattr(adapter, "is_group_chat", None)
    return cast(Callable[[str], bool], method) if callable(method) else None


def editable(adapter: Adapter | None) -> EditablePlatform | None:
    """The adapter as a platform whose previews are edited messages, or None (drafts or none)."""
    if adapter is None or not adapter.capabilities.edit or adapter.capabilities.drafts:
        return None
    return adapter  # type: ignore[return-value]


def prompting(adapter: Adapter | None) -> PromptingPlatform | None:
    """The adapter as a button platform, or None (then prompts are plain text)."""
    if adapter is None or not adapter.capabilities.buttons:
        return None
    if not callable(getattr(adapter, "send_prompt", None)) or not callable(
        getattr(adapter, "resolve_prompt", None)
    ):
        return None
    return cast(PromptingPlatform, adapter)


class PlatformStores(
    Cursors,
    OutboxConfirmations,
    ApprovalReads,
    Accounts,
    WebChats,
    ApiKeys,
    Exchanges,
    SessionProfiles,
    Protocol,
):
    """Every store role a platform may be given; a plugin hands each adapter only the ones it uses."""


class PlatformContext(msgspec.Struct, frozen=True):
    """What a platform plugin builds its adapters over: the engine's ports and nothing else."""

    intake: Intake
    store: PlatformStores
    interrupt: Callable[[str, str], Awaitable[object]]
    """Stop a session's running turn from outside a chat (``session_key``, ``reason``): a relay's
    ``interrupt_inbound``. Its items are cancelled; the waiting messages stay."""
    count_refused: Callable[[str, str], None]
    """Count a delivery refused before it became an event (``platform``, ``code``) in the
    gateway's ``chatgate_refused_total``: a malformed relay frame."""
    environ: Mapping[str, str]
    """Where the secrets a platform's ``*_env`` keys name are read."""
    duplicate_marker: str = "(possible repeat) "
    """Prefixed to a reply re-sent after a send whose outcome is unknown."""
    http_loopback: bool = True
    """The gateway's HTTP server listens on loopback only."""
    auth_timeout: float = 10.0
    """Seconds a connection may take to prove who it is (``http.auth_timeout_seconds``): a web
    chat socket without an accepted hello by then is closed."""
    profiles: Profiles = msgspec.field(default_factory=Profiles)
    """The model profiles (``agent.profiles``): what the API lists and a request's ``model`` picks."""
    media: MediaIntake | None = None
    """Takes in files a platform receives itself (None: ``media.enabled`` is off)."""
    session_key_of: Callable[[Source], str] | None = None
    """The session key admission gives an event from a source (the web chat's model picker
    reads the session's profile by it); None: not known (a bare test context)."""

    def secret(self, name: str | None) -> str | None:
        """The value of the environment variable ``name`` (checked when the config loaded)."""
        return self.environ.get(name) if name else None
