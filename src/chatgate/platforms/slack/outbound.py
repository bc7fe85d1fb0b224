"""Message operations on Slack (``EditablePlatform`` and prompts) and what their errors mean.

Text goes out as mrkdwn rendered from the agent's Markdown (``mrkdwn.py``). A reply goes
into the thread of the message it answers: the event's thread, or, in a channel, a
thread started on that message (``reply_in_thread``); in a DM outside a thread it goes
to the conversation itself.

Result mapping:

- ``ok`` -> ``Delivered(ts)``;
- HTTP 429 -> ``RetryLater(Retry-After, scope)``: ``chat.postMessage`` is limited per
  channel (scope ``channel``: never another channel's wait), the other methods per
  workspace (scope ``platform``);
- a request that never left (connection refused) -> ``RetryLater``;
- a send that may have reached Slack (timeout, dropped connection, 5xx,
  ``internal_error``) -> ``Ambiguous``; the same for an edit -> ``RetryLater`` (an edit
  is idempotent);
- any other ``ok: false`` (``channel_not_found``, ``not_in_channel``,
  ``message_not_found``, ``msg_too_long``, ``invalid_auth``, ...) -> ``Rejected``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import aiohttp
from slack_sdk.errors import SlackApiError

from chatgate.domain.media import FileBody
from chatgate.domain.outbound import Ambiguous, Delivered, DeliveryResult, RateScope, Rejected, RetryLater
from chatgate.domain.outfiles import OutFile
from chatgate.domain.prompts import Prompt
from chatgate.platforms.slack.decode import chat_type_of
from chatgate.platforms.slack.files import put_upload
from chatgate.platforms.slack.mrkdwn import escape, markdown_to_mrkdwn

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient

log = logging.getLogger(__name__)
TRANSIENT_ERRORS = frozenset({"internal_error", "fatal_error", "service_unavailable", "request_timeout"})
PER_CHANNEL_METHODS = frozenset({"chat.postMessage"})
STATUS_TEXT = "is thinking…"


def _retry_after(exc: SlackApiError) -> float:
    headers = exc.response.headers or {}
    raw = headers.get("Retry-After") or headers.get("retry-after") or "1"
    try:
        return max(0.0, float(raw))
    except ValueError:
        return 1.0


def result_of(method: str, exc: BaseException, *, repeatable: bool) -> DeliveryResult:
    """What a failed call means for the ledger (see the module docstring)."""
    if isinstance(exc, SlackApiError):
        status = exc.response.status_code
        error = str(exc.response.get("error") or f"HTTP {status}")
        if status == 429:
            scope: RateScope = "channel" if method in PER_CHANNEL_METHODS else "platform"
            return RetryLater(f"{method}: rate limited", _retry_after(exc), scope)
        if status >= 500 or error in TRANSIENT_ERRORS:
            reason = f"{method}: {error}"
            return RetryLater(reason, 2.0) if repeatable else Ambiguous(reason)
        return Rejected(f"{method}: {error}")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return RetryLater(f"{method}: cannot reach Slack ({exc})", 2.0)
    reason = f"{method}: {type(exc).__name__}: {exc}"
    return RetryLater(reason, 2.0) if repeatable else Ambiguous(reason)


def prompt_blocks(prompt: Prompt) -> list[dict[str, Any]]:
    """The prompt as a section and one button per option, each carrying its ``hp1:`` token."""
    buttons: list[dict[str, Any]] = []
    for option in prompt.options:
        button: dict[str, Any] = {
            "type": "button",
            "action_id": f"chatgate_approval_{option.id}",
            "text": {"type": "plain_text", "text": option.label[:75]},
            "value": prompt.token(option.id),
        }
        if option.id == "deny":
            button["style"] = "danger"
        elif option.id == "once":
            button["style"] = "primary"
        buttons.append(button)
    section = {"type": "section", "text": {"type": "mrkdwn", "text": escape(prompt.text)[:3000]}}
    return [
        section,
        {"type": "actions", "block_id": f"chatgate_prompt:{prompt.prompt_id}", "elements": buttons},
    ]


class SlackOutbound:
    """chat.postMessage / chat.update / chat.delete / assistant.threads.setStatus, honestly."""

    def __init__(
        self, client: AsyncWebClient, *, reply_in_thread: bool = True, timeout: float = 20.0
    ) -> None:
        self._client = client
        self._reply_in_thread = reply_in_thread
        self._timeout = timeout
        self.status_scope = True
        """False once Slack said the app lacks ``assistant:write``: no more status calls."""

    async def call(self, method: str, repeatable: bool, **params: Any) -> DeliveryResult:
        try:
            answer = await asyncio.wait_for(self._client.api_call(method, json=params), self._timeout)
        except (SlackApiError, aiohttp.ClientError, TimeoutError, OSError) as exc:
            return result_of(method, exc, repeatable=repeatable)
        ts = answer.get("ts")
        return Delivered(str(ts) if ts else None)

    async def send_file(
        self,
        chat_id: str,
        file: OutFile,
        body: FileBody,
        caption: str,
        target: Mapping[str, str],
        reply_to: str | None,
        api_base: str,
    ) -> DeliveryResult:
        """Slack's external upload: ``files.getUploadURLExternal``, the bytes to its URL, then
        ``files.completeUploadExternal`` shares the file in the chat. Only the last step posts
        anything, so a failure before it is a plain retry; the last one's unknown outcome is
        ``Ambiguous`` (Slack has no idempotency key: the retry's comment says it may repeat)."""
        try:
            got = await asyncio.wait_for(
                self._client.api_call(
                    "files.getUploadURLExternal", params={"filename": file.name, "length": body.size}
                ),
                self._timeout,
            )
            url, file_id = str(got.get("upload_url") or ""), str(got.get("file_id") or "")
            await put_upload(url, api_base, file.name, file.mime, body, self._timeout + body.size / 1_000_000)
        except (SlackApiError, aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            if isinstance(exc, SlackApiError):
                return result_of("files.getUploadURLExternal", exc, repeatable=True)
            return RetryLater(f"the upload to Slack failed: {type(exc).__name__}: {exc}", 2.0)
        params: dict[str, Any] = {"files": [{"id": file_id, "title": file.name}], "channel_id": chat_id}
        if caption:
            params["initial_comment"] = caption
        thread = self.thread_for(chat_id, target, reply_to)
        if thread:
            params["thread_ts"] = thread
        result = await self.call("files.completeUploadExternal", False, **params)
        return Delivered(file_id) if isinstance(result, Delivered) else result

    def thread_for(self, chat_id: str, target: Mapping[str, str], reply_to: str | None) -> str | None:
        thread = target.get("thread_id")
        if thread:
            return thread
        if self._reply_in_thread and reply_to and chat_type_of(chat_id) != "dm":
            return reply_to
        return None

    async def send_message(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        params: dict[str, Any] = {"channel": chat_id, "text": markdown_to_mrkdwn(text)}
        thread = self.thread_for(chat_id, target, reply_to)
        if thread:
            params["thread_ts"] = thread
        return await self.call("chat.postMessage", False, **params)

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        # An edit without blocks drops a prompt's buttons (how a resolved prompt ends).
        return await self.call(
            "chat.update", True, channel=chat_id, ts=message_id, text=markdown_to_mrkdwn(text), blocks=[]
        )

    async def delete_message(self, chat_id: str, message_id: str, target: Mapping[str, str]) -> bool:
        return isinstance(await self.call("chat.delete", True, channel=chat_id, ts=message_id), Delivered)

    def can_type(self, target: Mapping[str, str]) -> bool:
        """Only in a thread, with the scope: elsewhere ``send_typing`` makes no call."""
        return bool(target.get("thread_id")) and self.status_scope

    async def send_typing(self, chat_id: str, target: Mapping[str, str]) -> DeliveryResult | None:
        """The assistant thread status, where there is a thread and the app has the scope."""
        thread = target.get("thread_id")
        if not thread or not self.status_scope:
            return None
        result = await self.call(
            "assistant.threads.setStatus", True, channel_id=chat_id, thread_ts=thread, status=STATUS_TEXT
        )
        if isinstance(result, Rejected):
            if "missing_scope" in result.reason or "not_allowed" in result.reason:
                self.status_scope = False
                log.info("no assistant thread status: the Slack app lacks the assistant:write scope")
            return None
        return result

    async def send_prompt(self, chat_id: str, prompt: Prompt, target: Mapping[str, str]) -> DeliveryResult:
        params: dict[str, Any] = {
            "channel": chat_id,
            "text": escape(prompt.text),
            "blocks": prompt_blocks(prompt),
        }
        if target.get("thread_id"):
            params["thread_ts"] = target["thread_id"]
        return await self.call("chat.postMessage", False, **params)

    async def post_ephemeral(self, chat_id: str, user_id: str, text: str, thread: str | None) -> None:
        """Tell one person something (an approval tap that lost, a refusal); best effort."""
        params: dict[str, Any] = {"channel": chat_id, "user": user_id, "text": escape(text)}
        if thread:
            params["thread_ts"] = thread
        result = await self.call("chat.postEphemeral", False, **params)
        if not isinstance(result, Delivered):
            log.info("could not tell Slack user %s: %s", user_id, result)
