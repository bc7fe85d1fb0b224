"""The message operations of an adapter whose outbound half makes the platform calls.

Telegram's and Discord's adapters each hold an outbound object that speaks the platform's
API; the engine's ports (``EditablePlatform``, ``PromptingPlatform``) are the adapter's, so
the adapter forwards them. One forwarding, shared, instead of a copy per platform.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, Protocol, TypeVar

from chatgate.domain.outbound import DeliveryResult
from chatgate.domain.prompts import Prompt, PromptResolution
from chatgate.engine.ports import EditablePlatform, resolve_prompt_by_edit


class EditingOutbound(EditablePlatform, Protocol):
    """What the outbound half offers: edits, typing, deletes and button prompts."""

    async def send_prompt(
        self, chat_id: str, prompt: Prompt, target: Mapping[str, str]
    ) -> DeliveryResult: ...


OutboundT = TypeVar("OutboundT", bound=EditingOutbound)


class ForwardsToOutbound(Generic[OutboundT]):
    """``EditablePlatform`` and ``PromptingPlatform`` by way of ``self._outbound``; a prompt
    is resolved by editing its message (``resolve_prompt_by_edit``)."""

    _outbound: OutboundT

    async def send_message(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        return await self._outbound.send_message(chat_id, text, target, reply_to)

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        return await self._outbound.edit_message(chat_id, message_id, text, target)

    async def send_typing(self, chat_id: str, target: Mapping[str, str]) -> DeliveryResult | None:
        return await self._outbound.send_typing(chat_id, target)

    async def delete_message(self, chat_id: str, message_id: str, target: Mapping[str, str]) -> bool:
        return await self._outbound.delete_message(chat_id, message_id, target)

    async def send_prompt(self, chat_id: str, prompt: Prompt, target: Mapping[str, str]) -> DeliveryResult:
        return await self._outbound.send_prompt(chat_id, prompt, target)

    async def resolve_prompt(
        self, chat_id: str, prompt: Prompt, resolution: PromptResolution, target: Mapping[str, str]
    ) -> DeliveryResult:
        return await resolve_prompt_by_edit(self._outbound, chat_id, prompt, resolution, target)
