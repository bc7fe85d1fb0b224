"""The native Slack adapter: Socket Mode (or HTTP events) in, threaded replies and edits out.

Inbound: Slack's Socket Mode client (slack-sdk, aiohttp) receives envelopes; each is
queued behind the earlier envelopes of its channel (``PerKeyQueues``), dispatched by
the Bolt app (``bolt_app.py``), decoded (``decode.py``) and handed to the intake.
The envelope is acknowledged only when the intake answered admitted, duplicate or
refused; an event that was not committed is not acknowledged and Slack redelivers it
(``retry_attempt``), which the store recognizes by its ``event_id``.

Outbound: ``SlackOutbound`` implements the ``EditablePlatform`` operations; ``deliver``
puts an outbox row on Slack through ``engine.ports.deliver_final``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec.structs import replace

from chatgate.domain.inbound import Attachment, Inbound
from chatgate.domain.log_budget import LogBudget
from chatgate.domain.media import FileBody
from chatgate.domain.outbound import Capabilities, DeliveryResult
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.outfiles import OutFile
from chatgate.domain.prompts import Prompt, PromptResolution
from chatgate.domain.source import Source
from chatgate.domain.tasks import cancel_and_wait
from chatgate.engine.ports import (
    WAIT_BRIEFLY,
    AdapterState,
    Admitted,
    Intake,
    Refused,
    Unavailable,
    Undecodable,
    deliver_final,
    resolve_prompt_by_edit,
)
from chatgate.platforms.kit.per_key import PerKeyQueues
from chatgate.platforms.kit.skipped import Skipped
from chatgate.platforms.slack.decode import (
    PLATFORM,
    IntakeRules,
    decode_command,
    decode_event,
)
from chatgate.platforms.slack.files import download
from chatgate.platforms.slack.http_events import serve_http
from chatgate.platforms.slack.interactive import decode_interactive
from chatgate.platforms.slack.outbound import SlackOutbound
from chatgate.platforms.slack.section import SlackSection
from chatgate.platforms.slack.streams import SlackStreams

if TYPE_CHECKING:
    from slack_bolt.async_app import AsyncApp
    from slack_bolt.authorization import AuthorizeResult
    from slack_bolt.response import BoltResponse
    from slack_sdk.socket_mode.aiohttp import SocketModeClient
    from slack_sdk.socket_mode.request import SocketModeRequest
    from slack_sdk.web.async_client import AsyncWebClient
    from slack_sdk.web.async_slack_response import AsyncSlackResponse
    from starlette.requests import Request
    from starlette.responses import Response

log = logging.getLogger(__name__)
REFUSED_TEXT = "Sorry, you are not allowed to use this bot."


class SlackSettings(msgspec.Struct, frozen=True):
    """The Slack section with the secrets its ``*_env`` keys name, read from the environment."""

    section: SlackSection
    bot_token: str
    app_token: str | None = None
    """Socket Mode's app-level token (``xapp-``); None in HTTP mode."""
    signing_secret: str | None = None
    """HTTP mode's signing secret; None in Socket Mode."""
    duplicate_marker: str = ""
    max_pending: int = 1024
    """Envelopes queued for admission at once; beyond this the socket reader waits."""

    @property
    def socket_mode(self) -> bool:
        return self.signing_secret is None


@dataclass
class _Identity:
    bot_user_id: str = ""
    team_id: str = ""
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    auth: AsyncSlackResponse | None = None
    """The adapter's ``auth.test`` answer, which Bolt's ``authorize`` hands back."""


CAPABILITIES = Capabilities(
    edit=True,
    drafts=False,
    buttons=True,
    threads=True,
    # Slack truncates text past 40,000 characters and advises 4,000; mrkdwn escapes
    # (&amp;) lengthen the text, so the splitter aims below that.
    max_length=3_800,
    length_unit="chars",
    markdown="mrkdwn",
    typing=True,
    # chat.update is Tier 3 (~50 a minute); chat.postMessage about one a second per channel.
    edit_interval=1.2,
    chat_min_interval=1.0,
    platform_max_rate=20.0,
    native_stream=True,
    max_upload_bytes=1_000_000_000,  # Slack's limit per file (tools.attach_max_bytes bounds it first)
)


class SlackAdapter:
    platform = PLATFORM

    def __init__(self, settings: SlackSettings, intake: Intake) -> None:
        self._settings = settings
        self._intake = intake
        self._identity = _Identity()
        self._web: AsyncWebClient | None = None
        self._outbound: SlackOutbound | None = None
        self._streams: SlackStreams | None = None
        self.app: AsyncApp | None = None
        self._socket: SocketModeClient | None = None
        self._lanes = PerKeyQueues(settings.max_pending, name="slack-intake")
        self._runner: asyncio.Task[None] | None = None
        self._chores: set[asyncio.Task[None]] = set()
        self._accepting = True
        self._detail = "not started"
        self._refusals = LogBudget(log)
        """Refused HTTP Events requests: anyone can send them, so their lines are budgeted."""

    @property
    def capabilities(self) -> Capabilities:
        """Native streaming until Slack says the workspace has none (or the config turns it off)."""
        streams = self._streams
        off = not self._settings.section.streaming or (streams is not None and streams.supported is False)
        return replace(CAPABILITIES, native_stream=False) if off else CAPABILITIES

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        # slack_sdk and Bolt: at start, so the plugin and a config check stay light
        from slack_sdk.web.async_client import AsyncWebClient

        from chatgate.platforms.slack.bolt_app import build_bolt_app  # Bolt, at start (idem)

        s = self._settings
        self._web = AsyncWebClient(token=s.bot_token, base_url=s.section.api_base)
        self._outbound = SlackOutbound(self._web, reply_in_thread=s.section.reply_in_thread)
        self._streams = SlackStreams(self._outbound, enabled=s.section.streaming)
        self.app = build_bolt_app(self._web, self._handle, s.signing_secret, self._authorization)
        self._detail = "connecting"
        self._runner = asyncio.create_task(self._run(), name="chatgate-slack")

    async def _run(self) -> None:
        """Learn who the bot is (auth.test), then, in Socket Mode, connect; retried with backoff."""
        delay = 1.0
        while not self._identity.ready.is_set():
            try:
                assert self._web is not None
                auth = await self._web.auth_test()
                self._identity.auth = auth
                self._identity.bot_user_id = str(auth.get("user_id") or "")
                self._identity.team_id = str(auth.get("team_id") or "")
                self._identity.ready.set()
            except Exception as exc:  # a bad token is an operator's problem: say so, keep trying
                self._detail = f"auth.test failed: {_redact(str(exc), self._settings)}"
                log.warning("Slack %s; retrying in %.0f s", self._detail, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 60.0)
        if self._settings.socket_mode:
            await self._connect_socket()
        self._detail = f"bot {self._identity.bot_user_id} in {self._identity.team_id}: connected"

    async def _connect_socket(self) -> None:
        from slack_sdk.socket_mode.aiohttp import SocketModeClient
        from slack_sdk.web.async_client import AsyncWebClient

        s = self._settings
        assert s.app_token is not None
        self._socket = SocketModeClient(
            app_token=s.app_token, web_client=AsyncWebClient(base_url=s.section.api_base), ping_interval=10
        )
        self._socket.socket_mode_request_listeners.append(self._on_envelope)  # type: ignore[arg-type]
        await self._socket.connect()  # type: ignore[no-untyped-call]

    def stop_intake(self) -> None:
        self._accepting = False

    async def aclose(self, budget: float = 5.0) -> None:
        self._accepting = False
        tasks = [t for t in (self._runner, *self._chores) if t is not None]
        await cancel_and_wait(tasks)
        if self._socket is not None:
            try:
                await asyncio.wait_for(self._socket.close(), budget)  # type: ignore[no-untyped-call]
            except Exception as exc:
                log.info("closing the Slack socket: %s", exc)
            self._socket = None
        await self._lanes.aclose()
        if self._web is not None and self._web.session is not None:
            await self._web.session.close()
        self._web = None
        self._detail = "stopped"

    def state(self) -> AdapterState:
        session = self._socket.current_session if self._socket is not None else None
        socket_up = session is not None and not session.closed
        connected = self._identity.ready.is_set() and (not self._settings.socket_mode or socket_up)
        return AdapterState(connected, self._detail)

    # ------------------------------------------------------------ inbound

    async def _on_envelope(self, client: SocketModeClient, req: SocketModeRequest) -> None:
        """Queue the envelope behind its channel's earlier ones (runs before any await)."""
        if not self._accepting:
            return  # not acknowledged: Slack redelivers it to the next process
        await self._lanes.put(_channel_of(req.payload), lambda: self._dispatch(client, req))

    async def _dispatch(self, client: SocketModeClient, req: SocketModeRequest) -> None:
        from slack_bolt.adapter.socket_mode.async_internals import run_async_bolt_app, send_async_response

        assert self.app is not None
        response = await run_async_bolt_app(self.app, req)
        await send_async_response(client, req, response, 0.0)  # acks only a 200

    async def http_endpoint(self, request: Request) -> Response:
        """HTTP mode (``http_events.serve``): the checks, then Bolt; 200 only after commit, 503
        (Slack retries) when the event was not saved."""
        from starlette.responses import PlainTextResponse

        if self.app is None or not self._accepting:
            return PlainTextResponse("not ready", status_code=503)
        assert self._settings.signing_secret is not None  # HTTP mode has one (config)
        return await serve_http(self.app, self._settings.signing_secret, request, self._refusals)

    def _authorization(self) -> AuthorizeResult:
        """Who the bot is, from the adapter's ``auth.test``: no call per request. Before that
        answered (HTTP events at start) an identity without a user id lets the request
        through to ``_handle``, which answers 503 so Slack retries."""
        from slack_bolt.authorization import AuthorizeResult  # Bolt is loaded at start (above)

        token = self._settings.bot_token
        auth = self._identity.auth
        if auth is None:
            return AuthorizeResult(enterprise_id=None, team_id=None, bot_token=token)
        return AuthorizeResult.from_auth_test_response(bot_token=token, auth_test_response=auth)

    async def _handle(self, lane: str, body: dict[str, Any]) -> BoltResponse:
        """Decode, submit, and answer Bolt with the acknowledgement the intake's answer allows."""
        from slack_bolt.response import BoltResponse

        if not self._identity.ready.is_set():  # HTTP events before auth.test answered: Slack retries
            return BoltResponse(status=503, body="not ready")
        if lane == "event":
            decoded = decode_event(body, self._rules())
        elif lane == "command":
            decoded = decode_command(body, self._settings.section.slash_command)
        else:
            decoded = decode_interactive(body)
        if isinstance(decoded, Skipped):
            log.debug("Slack delivery skipped: %s", decoded.reason)
            return BoltResponse(status=200, body="")
        if not self._accepting:
            return BoltResponse(status=503, body="stopping")
        answer = await self._intake.submit(decoded, patience=WAIT_BRIEFLY)
        if isinstance(answer, Unavailable):
            log.warning("Slack delivery %s not saved; Slack will redeliver it: %s",
                        decoded.delivery_id, answer.reason)  # fmt: skip
            return BoltResponse(status=503, body="not saved")
        self._tell(decoded, answer)
        if lane == "command" and isinstance(answer, Refused):
            text = REFUSED_TEXT if answer.code == "unauthorized" else answer.message
            return BoltResponse(status=200, body={"response_type": "ephemeral", "text": text})
        return BoltResponse(status=200, body="")

    def _tell(self, decoded: Inbound | Undecodable, answer: Admitted | Refused) -> None:
        """An approval tap that lost is told so, privately, after the ack (best effort)."""
        if isinstance(answer, Refused):
            log.info("skipped Slack delivery %s (%s): %s", decoded.delivery_id, answer.code, answer.message,
                     extra={"platform": PLATFORM, "code": answer.code})  # fmt: skip
            return
        feedback = answer.answer
        if feedback is None or feedback.won or not isinstance(decoded, Inbound) or self._outbound is None:
            return
        source = decoded.source
        if source.chat_id and source.user_id:
            chore = asyncio.create_task(
                self._outbound.post_ephemeral(source.chat_id, source.user_id, feedback.text, source.thread_id)
            )
            self._chores.add(chore)
            chore.add_done_callback(self._chores.discard)

    def _rules(self) -> IntakeRules:
        s = self._settings.section
        return IntakeRules(
            self._identity.bot_user_id, s.require_mention, tuple(s.channels), tuple(s.free_response_channels)
        )

    # ------------------------------------------------------------ outbound

    def _out(self) -> SlackOutbound:
        if self._outbound is None:
            raise RuntimeError("the Slack adapter is not started")
        return self._outbound

    def _live(self) -> SlackStreams:
        if self._streams is None:
            raise RuntimeError("the Slack adapter is not started")
        return self._streams

    async def deliver(self, row: OutboxRow) -> DeliveryResult:
        return await deliver_final(self, row, self._settings.duplicate_marker)

    async def draft(self, source: Source, in_reply_to: str | None, text: str) -> None:
        return None  # previews are edits of a sent message (capabilities.drafts is False)

    async def send_file(self, row: OutboxRow, file: OutFile, body: FileBody, caption: str) -> DeliveryResult:
        """``engine.ports.FilePlatform``: Slack's external upload of the file into the reply's place."""
        target = {k: str(v) for k, v in row.target.items() if isinstance(v, str | int)}
        api_base = self._settings.section.api_base
        return await self._out().send_file(
            row.chat_id, file, body, caption, target, row.in_reply_to, api_base
        )

    def open_attachment(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """``engine.ports.MediaSource``: a message's file, with the bot token (``files.py``)."""
        return download(attachment.ref, self._settings.bot_token, self._settings.section.api_base)

    async def send_message(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        return await self._out().send_message(chat_id, text, target, reply_to)

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        """An edit; of an open native stream (a final, a stopped turn), the seal (``streams.py``)."""
        return await self._live().seal(chat_id, message_id, text, target)

    async def start_stream(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        return await self._live().start(chat_id, text, target, reply_to)

    async def append_stream(
        self, chat_id: str, stream_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        return await self._live().append(chat_id, stream_id, text, target)

    async def send_typing(self, chat_id: str, target: Mapping[str, str]) -> DeliveryResult | None:
        return await self._out().send_typing(chat_id, target)

    def can_type(self, chat_id: str, target: Mapping[str, str]) -> bool:
        """``engine.ports.TypingTargets``: a target without a thread shows no status."""
        return self._outbound is not None and self._outbound.can_type(target)

    async def delete_message(self, chat_id: str, message_id: str, target: Mapping[str, str]) -> bool:
        return await self._out().delete_message(chat_id, message_id, target)

    async def send_prompt(self, chat_id: str, prompt: Prompt, target: Mapping[str, str]) -> DeliveryResult:
        return await self._out().send_prompt(chat_id, prompt, target)

    async def resolve_prompt(
        self, chat_id: str, prompt: Prompt, resolution: PromptResolution, target: Mapping[str, str]
    ) -> DeliveryResult:
        return await resolve_prompt_by_edit(self._out(), chat_id, prompt, resolution, target)


def _channel_of(payload: dict[str, Any]) -> str:
    """The conversation an envelope belongs to, so one chat's envelopes are admitted in order."""
    event = payload.get("event")
    if isinstance(event, dict) and isinstance(event.get("channel"), str):
        return str(event["channel"])
    channel = payload.get("channel")
    if isinstance(channel, dict) and isinstance(channel.get("id"), str):
        return str(channel["id"])
    return str(payload.get("channel_id") or "")


def _redact(text: str, settings: SlackSettings) -> str:
    for secret in (settings.bot_token, settings.app_token, settings.signing_secret):
        if secret:
            text = text.replace(secret, "<secret>")
    return text
