"""Slack's native streaming ("the stream is the message"): chat.startStream / appendStream / stopStream.

The stream consumer opens a stream with the reply so far and then hands the whole reply
so far at each interval; ``append_stream`` sends only what is new, so the frames are
prefix-stable by construction and never carry a cursor. The final's edit of the stream
(``deliver_final`` -> ``edit_message``) seals it:

- the final extends what was streamed: ``chat.stopStream`` appends the rest;
- it does not (the reply was rewritten, or split into parts): the stream is stopped and
  the sealed message, a normal message now, is updated to the final text;
- Slack refuses the seal for good: ``Rejected``, and ``deliver_final`` sends the final as
  a plain message and deletes the stream (the final is never lost, one message stays);
- an ambiguous seal is retried; a stream that turns out sealed already is updated to the
  final, so the retry also ends with exactly the final text.

A message this process does not know (a preview a process that died left, perhaps a
stream still open) is closed by ``edit_message`` too, the way Slack closes streams:
``chat.stopStream`` where it stands, then ``chat.update`` to the text (a plain message
answers that it is not streaming and is just updated). Where streaming is unavailable
(a DM outside a thread, where Slack cannot stream; a workspace without the methods) the
stream is an ordinary preview: a message with the cursor, edited. Known streams are kept
in a bounded map (oldest dropped first); a sealed one stays as a tombstone, so a
straggling append cannot reopen it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from chatgate.domain.outbound import PREVIEW_CURSOR, Delivered, DeliveryResult, Rejected
from chatgate.platforms.slack.outbound import SlackOutbound

log = logging.getLogger(__name__)
MAX_STREAMS = 512
UNSUPPORTED = ("unknown_method", "not_allowed_token_type", "method_deprecated", "feature_not_enabled")
NOT_STREAMING = ("message_not_in_streaming_state", "not_streaming")


@dataclass
class _Stream:
    native: bool
    text: str = ""
    """What was appended and acknowledged (native), or the last preview text (plain)."""
    open: bool = True


class SlackStreams:
    def __init__(self, outbound: SlackOutbound, enabled: bool = True) -> None:
        self._out = outbound
        self.supported: bool | None = None if enabled else False
        """None: not known yet; False once Slack said the workspace has no streaming."""
        self._streams: OrderedDict[str, _Stream] = OrderedDict()

    def _remember(self, stream_id: str, stream: _Stream) -> None:
        self._streams[stream_id] = stream
        self._streams.move_to_end(stream_id)
        while len(self._streams) > MAX_STREAMS:
            self._streams.popitem(last=False)

    async def start(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        thread = self._out.thread_for(chat_id, target, reply_to)
        if thread and self.supported is not False:
            # Slack needs the recipient (the author of the message being answered) in a channel.
            recipient = {
                key: target[field]
                for key, field in (("recipient_user_id", "user_id"), ("recipient_team_id", "scope_id"))
                if target.get(field)
            }
            result = await self._out.call("chat.startStream", False, channel=chat_id, thread_ts=thread,
                                          markdown_text=text, **recipient)  # fmt: skip
            if isinstance(result, Delivered) and result.platform_message_id:
                self.supported = True
                self._remember(result.platform_message_id, _Stream(True, text))
                return result
            if not (isinstance(result, Rejected) and any(e in result.reason for e in UNSUPPORTED)):
                return result
            self.supported = False
            log.info("this Slack workspace has no native streaming (%s); previews are edits", result.reason)
        result = await self._out.send_message(chat_id, text + PREVIEW_CURSOR, target, reply_to)
        if isinstance(result, Delivered) and result.platform_message_id:
            self._remember(result.platform_message_id, _Stream(False, text))
        return result

    async def append(
        self, chat_id: str, stream_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        stream = self._streams.get(stream_id)
        if stream is None or not stream.open:
            return Delivered(stream_id)  # sealed (or forgotten): a straggler never reopens it
        if not stream.native:
            result = await self._out.edit_message(chat_id, stream_id, text + PREVIEW_CURSOR, target)
        elif not text.startswith(stream.text):
            return Rejected("a stream only grows: the text is not an extension of what was streamed")
        elif text == stream.text:
            return Delivered(stream_id)
        else:
            result = await self._out.call("chat.appendStream", True, channel=chat_id, ts=stream_id,
                                          markdown_text=text[len(stream.text) :])  # fmt: skip
        if isinstance(result, Delivered):
            stream.text = text
        return result

    async def seal(
        self, chat_id: str, stream_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        """``edit_message`` of any message: for an open native stream, seal it with ``text``."""
        stream = self._streams.get(stream_id)
        if stream is None:
            return await self._edit_unknown(chat_id, stream_id, text, target)
        if not stream.native or not stream.open:
            result = await self._out.edit_message(chat_id, stream_id, text, target)
            stream.open = stream.open and not isinstance(result, Delivered)
            return result
        extends = text.startswith(stream.text)
        rest = text[len(stream.text) :] if extends else ""
        stopped = await self._out.call("chat.stopStream", True, channel=chat_id, ts=stream_id,
                                       **({"markdown_text": rest} if rest else {}))  # fmt: skip
        if isinstance(stopped, Rejected) and any(e in stopped.reason for e in NOT_STREAMING):
            stream.open = False  # an earlier seal went through after all: make the text exact
            return await self._out.edit_message(chat_id, stream_id, text, target)
        if not isinstance(stopped, Delivered):
            return stopped
        stream.open = False
        if extends:
            stream.text = text
            return Delivered(stream_id)
        return await self._out.edit_message(chat_id, stream_id, text, target)

    async def _edit_unknown(
        self, chat_id: str, message_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        """A message this process did not open: a preview a dead process left. It may be a
        stream still open, which is closed the way Slack closes streams (``chat.stopStream``,
        where it stands) before it becomes ``text``; a plain message answers that it is not
        streaming, and is simply updated."""
        if self.supported is not False:
            stopped = await self._out.call("chat.stopStream", True, channel=chat_id, ts=message_id)
            if isinstance(stopped, Rejected) and any(e in stopped.reason for e in UNSUPPORTED):
                self.supported = False
                log.info("this Slack workspace has no native streaming (%s)", stopped.reason)
            elif not isinstance(stopped, Delivered | Rejected):
                return stopped  # ambiguous or rate-limited: the final's delivery tries again
        return await self._out.edit_message(chat_id, message_id, text, target)

    def __len__(self) -> int:
        return len(self._streams)
