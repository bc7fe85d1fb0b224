"""One fronted platform of the relay as an engine adapter: relay ops behind ``EditablePlatform``
and ``PromptingPlatform``; the hub (``adapter.py``) owns the connection and the intake."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Literal

from chatgate.domain.inbound import Attachment
from chatgate.domain.media import FileBody
from chatgate.domain.outbound import (
    REPLY_VIA_KEY,
    Capabilities,
    Deferred,
    Delivered,
    DeliveryResult,
    Rejected,
    RetryLater,
    TaskProgress,
)
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.outfiles import OutFile
from chatgate.domain.prompts import Prompt, PromptResolution
from chatgate.domain.source import Source
from chatgate.engine.ports import (
    AdapterState,
    deliver_final,
    marked_text,
    resolve_prompt_by_edit,
)
from chatgate.platforms.relay.drafts import RelayDrafts
from chatgate.platforms.relay.frames import (
    DeleteAction,
    EditAction,
    FollowUpAction,
    PromptAction,
    PromptOption,
    SendAction,
    SendMediaAction,
    TaskCardAction,
    TaskCardStopAction,
    TaskChunk,
    TypingAction,
)
from chatgate.platforms.relay.media import open_media
from chatgate.platforms.relay.rehost import RehostFailed, RehostRefused, rehost

log = logging.getLogger(__name__)


if TYPE_CHECKING:
    from chatgate.platforms.relay.adapter import RelayHub

INTERACTION_TOKEN_KIND = "discord.interaction_token"
MediaKind = Literal["image", "voice", "audio", "video", "document"]


def media_kind(mime: str) -> MediaKind:
    """The contract's ``media_kind`` of a file: an OGG/Opus note is a voice message."""
    if mime in ("audio/ogg", "audio/opus"):
        return "voice"
    major = mime.partition("/")[0]
    if major == "image":
        return "image"
    if major == "audio":
        return "audio"
    return "video" if major == "video" else "document"


def _default_capabilities(platform: str) -> Capabilities:
    """Until the connector's descriptor arrives (rows wait: the relay is not connected)."""
    if platform == "telegram":
        return Capabilities(edit=True, max_length=4096, length_unit="utf16", typing=True)
    return Capabilities(edit=True, max_length=2000, typing=True)


def _metadata(target: Mapping[str, str]) -> dict[str, str]:
    """The egress discriminators the connector routes by (scope, the triggering author, thread)."""
    return {k: str(target[k]) for k in ("scope_id", "user_id", "thread_id") if target.get(k)}


class RelayPlatform:
    """One fronted platform as an engine adapter (``EditablePlatform`` over relay ops), and a
    ``MediaSource``: its events' files are fetched as the contract carries them (``media.py``)."""

    def open_attachment(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """``engine.ports.MediaSource``: a ``media_urls`` entry's bytes (a URL or inline)."""
        return open_media(attachment.ref, self.platform, self._hub.settings.allow_private_urls)

    def __init__(self, hub: RelayHub, platform: str) -> None:
        self._hub = hub
        self.platform = platform
        self._fallback = _default_capabilities(platform)
        self._drafts = RelayDrafts(lambda action: self._hub.request(self.platform, action))

    @property
    def capabilities(self) -> Capabilities:
        descriptor = self._hub.descriptor(self.platform)
        return descriptor.capabilities() if descriptor is not None else self._fallback

    @property
    def hub(self) -> RelayHub:
        return self._hub

    async def start(self) -> None:
        self._hub.start()

    def stop_intake(self) -> None:
        self._hub.stop_intake()

    async def aclose(self, budget: float) -> None:
        await self._hub.close(budget)

    def state(self) -> AdapterState:
        return self._hub.state(self.platform)

    async def draft(self, source: Source, in_reply_to: str | None, text: str) -> None:
        return None  # previews are edits of a sent message

    async def deliver(self, row: OutboxRow) -> DeliveryResult:
        descriptor = self._hub.descriptor(self.platform)
        if descriptor is None:
            return Deferred("the relay is not connected", retry_in=2.0)
        if row.target.get(REPLY_VIA_KEY) == "interaction" and descriptor.supports("follow_up"):
            action = FollowUpAction(
                session_key=row.session_key,
                kind=INTERACTION_TOKEN_KIND,
                content=marked_text(row, self._hub.duplicate_marker),
                metadata=_metadata({k: str(v) for k, v in row.target.items()}),
            )
            return await self._hub.request(self.platform, action)
        return await deliver_final(self, row, self._hub.duplicate_marker)

    async def send_message(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        action = SendAction(
            chat_id=chat_id, content=text, metadata=_metadata(target), reply_to=reply_to or None
        )
        return await self._hub.request(self.platform, action)

    async def start_stream(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        """A ``draft`` stream (only reached when the descriptor advertises it: ``native_stream``)."""
        return await self._drafts.start(chat_id, text, _metadata(target), reply_to)

    async def append_stream(
        self, chat_id: str, stream_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        return await self._drafts.append(chat_id, stream_id, text, _metadata(target))

    async def send_file(self, row: OutboxRow, file: OutFile, body: FileBody, caption: str) -> DeliveryResult:
        """``FilePlatform``: the connector re-hosts the file (``rehost.py``), then ``send_media``
        posts it. Only the op posts anything: a failed re-host is a plain retry, and the op's
        unknown outcome is ``Ambiguous`` (its caption then carries the duplicate marker)."""
        descriptor = self._hub.descriptor(self.platform)
        if descriptor is None:
            return Deferred("the relay is not connected", retry_in=2.0)
        if not descriptor.supports("send_media"):
            return Rejected("the connector does not advertise the send_media op")
        settings = self._hub.settings
        try:
            url = await rehost(settings.url, settings.gateway_id, settings.secret, file, body)
        except RehostRefused as exc:
            return Rejected(str(exc))
        except RehostFailed as exc:
            return RetryLater(str(exc), 5.0)
        target = {k: str(v) for k, v in row.target.items() if isinstance(v, str)}
        action = SendMediaAction(
            chat_id=row.chat_id,
            media_kind=media_kind(file.mime),
            source_url=url,
            caption=caption,
            reply_to=row.in_reply_to or None,
            metadata=_metadata(target),
        )
        return await self._hub.request(self.platform, action)

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        if self._drafts.knows(message_id):  # an open stream: this edit (the final) seals it
            return await self._drafts.seal(chat_id, message_id, text, _metadata(target))
        action = EditAction(chat_id=chat_id, message_id=message_id, content=text, metadata=_metadata(target))
        result = await self._hub.request(self.platform, action)
        return Delivered(message_id) if isinstance(result, Delivered) else result

    async def send_typing(self, chat_id: str, target: Mapping[str, str]) -> DeliveryResult | None:
        return await self._hub.request(
            self.platform, TypingAction(chat_id=chat_id, metadata=_metadata(target))
        )

    async def send_prompt(self, chat_id: str, prompt: Prompt, target: Mapping[str, str]) -> DeliveryResult:
        """Native buttons through the connector's ``prompt`` op (only when advertised).

        The connector turns each option into a button whose callback token is
        ``hp1:<prompt_id>:<option_id>``; a press comes back as a ``prompt_response``
        (text lane) or a Discord component interaction with that custom id.
        """
        descriptor = self._hub.descriptor(self.platform)
        if descriptor is None or not descriptor.supports("prompt"):
            return Rejected("the connector does not advertise the prompt op")
        action = PromptAction(
            chat_id=chat_id,
            prompt_kind="approval",
            prompt_id=prompt.prompt_id,
            content=prompt.text,
            options=tuple(
                PromptOption(id=o.id, label=o.label, style="danger" if o.id == "deny" else "primary")
                for o in prompt.options
            ),
            metadata=_metadata(target),
        )
        return await self._hub.request(self.platform, action)

    async def resolve_prompt(
        self, chat_id: str, prompt: Prompt, resolution: PromptResolution, target: Mapping[str, str]
    ) -> DeliveryResult:
        return await resolve_prompt_by_edit(self, chat_id, prompt, resolution, target)

    async def show_tasks(
        self, chat_id: str, card_id: str, tasks: tuple[TaskProgress, ...], target: Mapping[str, str]
    ) -> DeliveryResult | None:
        """The turn's tool calls as a card, only where the descriptor advertises ``task_card``."""
        descriptor = self._hub.descriptor(self.platform)
        if descriptor is None or not descriptor.supports("task_card"):
            return None
        chunks = tuple(TaskChunk(id=t.id, title=t.title, status=t.status) for t in tasks)
        action = TaskCardAction(chat_id=chat_id, card_id=card_id, chunks=chunks, metadata=_metadata(target))
        return await self._hub.request(self.platform, action)

    async def stop_tasks(
        self, chat_id: str, card_id: str, target: Mapping[str, str]
    ) -> DeliveryResult | None:
        descriptor = self._hub.descriptor(self.platform)
        if descriptor is None or not descriptor.supports("task_card_stop"):
            return None
        action = TaskCardStopAction(chat_id=chat_id, card_id=card_id, metadata=_metadata(target))
        return await self._hub.request(self.platform, action)

    async def delete_message(self, chat_id: str, message_id: str, target: Mapping[str, str]) -> bool:
        descriptor = self._hub.descriptor(self.platform)
        if descriptor is None or not descriptor.supports("delete"):
            return False
        action = DeleteAction(chat_id=chat_id, message_id=message_id, metadata=_metadata(target))
        return isinstance(await self._hub.request(self.platform, action), Delivered)
