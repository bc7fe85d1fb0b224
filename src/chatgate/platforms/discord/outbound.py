"""Message operations on Discord (``EditablePlatform``, prompts, follow-ups) and their results.

- ok -> ``Delivered(message_id)``;
- 429 -> ``RetryLater`` with its scope: the global limit pauses the platform, a route
  bucket (a channel's messages) pauses the chat; the row keeps its attempt;
- 400/403/404 (a deleted message, a channel we may not write in) -> ``Rejected``;
- 401 -> ``RetryLater`` a minute later, naming the token as the problem;
- never left -> ``RetryLater``; a send that may have been made (5xx, timeout) ->
  ``Ambiguous``, the same for an edit -> ``RetryLater`` (repeating an edit is harmless).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from chatgate.domain.errors import NotSent, PlatformCallError
from chatgate.domain.media import FileBody
from chatgate.domain.outbound import Ambiguous, Delivered, DeliveryResult, Rejected, RetryLater
from chatgate.domain.outfiles import OutFile
from chatgate.domain.prompts import Prompt
from chatgate.platforms.discord.rest import ApiRefused, DiscordRest, RateLimited

log = logging.getLogger(__name__)
DELETED_KEPT = 1000
WORKING_REACTION = "👀"
"""The reaction a person's message carries from admission until its answer is delivered."""
MAX_BUTTONS_PER_ROW = 5
NO_PINGS = {"parse": [], "replied_user": False}
"""The agent's text never pings @everyone, a role or the person it answers."""


def _buttons(prompt: Prompt) -> list[dict[str, Any]]:
    buttons = [
        {
            "type": 2,
            "style": 4 if o.id == "deny" else 1,
            "label": o.label[:80],
            "custom_id": prompt.token(o.id),
        }
        for o in prompt.options
    ]
    rows = [buttons[i : i + MAX_BUTTONS_PER_ROW] for i in range(0, len(buttons), MAX_BUTTONS_PER_ROW)]
    return [{"type": 1, "components": row} for row in rows]


def classify(exc: PlatformCallError, *, sending: bool) -> DeliveryResult:
    reason = str(exc)
    if isinstance(exc, RateLimited):
        return RetryLater(reason, exc.retry_after, scope="platform" if exc.global_limit else "channel")
    if isinstance(exc, NotSent):
        return RetryLater(reason, 0.0)
    if isinstance(exc, ApiRefused):
        if exc.status == 401:
            return RetryLater(
                f"the bot token was refused ({reason}); check platforms.discord.token_env", 60.0
            )
        return Rejected(reason)
    return Ambiguous(reason) if sending else RetryLater(reason, 0.0)


def _message_id(answer: Any) -> str | None:
    ident = answer.get("id") if isinstance(answer, dict) else None
    return ident if isinstance(ident, str) else None


class DiscordOutbound:
    def __init__(
        self, rest: DiscordRest, application_id: str | None = None, *, status_reactions: bool = False
    ) -> None:
        self._rest = rest
        self.application_id = application_id
        self._reactions = status_reactions
        self._deleted: OrderedDict[str, None] = OrderedDict()
        """Message ids this process deleted (stranded previews), so their MESSAGE_DELETE is ours."""

    def deleted_by_us(self, message_id: str) -> bool:
        return message_id in self._deleted

    async def _run(self, method: str, path: str, body: Any, *, sending: bool) -> DeliveryResult:
        try:
            answer = await self._rest.call(method, path, body)
        except PlatformCallError as exc:
            return classify(exc, sending=sending)
        return Delivered(_message_id(answer))

    async def send_message(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        if not text.strip():
            return Rejected("Discord cannot show an empty message")
        body: dict[str, Any] = {"content": text, "allowed_mentions": NO_PINGS}
        if reply_to:
            body["message_reference"] = {"message_id": reply_to, "fail_if_not_exists": False}
        return await self._run("POST", f"/channels/{chat_id}/messages", body, sending=True)

    async def send_file(
        self, chat_id: str, file: OutFile, body: FileBody, caption: str, reply_to: str | None, nonce: str
    ) -> DeliveryResult:
        """One message with the file as its attachment. ``nonce`` with ``enforce_nonce`` is Discord's
        own dedupe: a resend with the same nonce within minutes answers the message already posted
        instead of posting again, so a retried upload (even after a crash) posts once."""
        payload: dict[str, Any] = {
            "allowed_mentions": NO_PINGS,
            "attachments": [{"id": 0, "filename": file.name}],
            "nonce": nonce,
            "enforce_nonce": True,
        }
        if caption.strip():
            payload["content"] = caption[:2000]
        if reply_to:
            payload["message_reference"] = {"message_id": reply_to, "fail_if_not_exists": False}
        try:
            answer = await self._rest.upload(
                f"/channels/{chat_id}/messages", payload, file.name, file.mime, body
            )
        except PlatformCallError as exc:
            return classify(exc, sending=True)
        return Delivered(_message_id(answer))

    async def send_prompt(self, chat_id: str, prompt: Prompt, target: Mapping[str, str]) -> DeliveryResult:
        body = {"content": prompt.text, "allowed_mentions": NO_PINGS, "components": _buttons(prompt)}
        return await self._run("POST", f"/channels/{chat_id}/messages", body, sending=True)

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        if not text.strip():
            return Rejected("Discord cannot show an empty message")
        # ``components: []`` drops a prompt's buttons when it is edited into its outcome.
        body = {"content": text, "allowed_mentions": NO_PINGS, "components": []}
        result = await self._run("PATCH", f"/channels/{chat_id}/messages/{message_id}", body, sending=False)
        return Delivered(message_id) if isinstance(result, Delivered) else result

    async def send_typing(self, chat_id: str, target: Mapping[str, str]) -> DeliveryResult | None:
        try:
            await self._rest.call("POST", f"/channels/{chat_id}/typing")
        except RateLimited as exc:
            return classify(exc, sending=False)
        except PlatformCallError as exc:
            log.debug("Discord typing indicator failed: %s", exc)
        return None

    async def delete_message(self, chat_id: str, message_id: str, target: Mapping[str, str]) -> bool:
        self._deleted[message_id] = None
        while len(self._deleted) > DELETED_KEPT:
            self._deleted.popitem(last=False)
        try:
            await self._rest.call("DELETE", f"/channels/{chat_id}/messages/{message_id}")
        except PlatformCallError as exc:
            log.info("could not delete Discord message %s: %s", message_id, exc)
            return False
        return True

    async def mark_working(self, chat_id: str, message_id: str) -> None:
        """With ``status_reactions``: the person's message shows a reaction while it waits for its
        answer (best effort: a status, not a message; never retried, never in the outbox)."""
        await self._react("PUT", chat_id, message_id)

    async def mark_answered(self, chat_id: str, message_id: str | None) -> None:
        if message_id:
            await self._react("DELETE", chat_id, message_id)

    async def _react(self, method: str, chat_id: str, message_id: str) -> None:
        if not self._reactions:
            return
        path = f"/channels/{chat_id}/messages/{message_id}/reactions/{quote(WORKING_REACTION)}/@me"
        try:
            await self._rest.call(method, path)
        except PlatformCallError as exc:
            log.debug("Discord status reaction %s on %s failed: %s", method, message_id, exc)

    async def follow_up(self, token: str, text: str, *, ephemeral: bool = False) -> DeliveryResult:
        """A message on an interaction's token; ``Rejected`` once the token has expired."""
        if not text.strip():
            return Rejected("Discord cannot show an empty message")
        body: dict[str, Any] = {"content": text, "allowed_mentions": NO_PINGS}
        if ephemeral:
            body["flags"] = 64
        try:
            answer = await self._rest.call("POST", f"/webhooks/{self.application_id}/{token}", body)
        except ApiRefused as exc:
            # 401 "Invalid Webhook Token" / 404 "Unknown Webhook": the token is dead, not the bot's.
            return Rejected(f"the interaction token expired: {exc}")
        except PlatformCallError as exc:
            return classify(exc, sending=True)
        return Delivered(_message_id(answer))

    async def respond(self, interaction_id: str, token: str, body: dict[str, Any]) -> bool:
        """An interaction's callback (defer, or an ephemeral answer); ``False`` when refused."""
        try:
            await self._rest.call("POST", f"/interactions/{interaction_id}/{token}/callback", body)
        except PlatformCallError as exc:
            log.warning("could not answer Discord interaction %s: %s", interaction_id, exc)
            return False
        return True
