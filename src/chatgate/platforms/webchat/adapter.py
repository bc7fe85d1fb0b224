"""The web chat adapter: WebSocket frames in, outbox rows and drafts out."""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from starlette.websockets import WebSocket, WebSocketDisconnect

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.inbound import Inbound
from chatgate.domain.log_budget import LogBudget
from chatgate.domain.media import FileBody
from chatgate.domain.outbound import Deferred, Delivered, DeliveryResult
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.outfiles import OutFile
from chatgate.domain.prompts import Prompt, PromptResolution, prompt_token
from chatgate.domain.source import Source
from chatgate.domain.store_roles import Accounts, ApprovalReads, OutboxConfirmations, WebChats
from chatgate.engine.ports import WAIT_BRIEFLY, AdapterState, Intake, Refused, Unavailable
from chatgate.platforms.kit.trust import vouch
from chatgate.platforms.webchat.capabilities import web_capabilities
from chatgate.platforms.webchat.chat_claims import ChatClaims
from chatgate.platforms.webchat.connection import DEFAULT_MAX_QUEUED_BYTES, Connection
from chatgate.platforms.webchat.delivery_ids import web_button_delivery_id, web_delivery_id
from chatgate.platforms.webchat.frames import held_key, prompt_frame, resolved_frame, row_frame
from chatgate.platforms.webchat.model_choice import ModelChoice
from chatgate.platforms.webchat.protocol import Button, FrameError, Hello, Message, Received, decode
from chatgate.platforms.webchat.session_gate import Refusal, SessionGate
from chatgate.platforms.webchat.signed_sockets import SignedSockets
from chatgate.platforms.webchat.socket_gate import next_message, refuse
from chatgate.platforms.webchat.uploads import UploadSigner, message_files

log = logging.getLogger(__name__)
PLATFORM = "web"
RESTARTING = "the gateway is restarting"
BACKLOG_PAGE = 200
"""Unconfirmed replies read per store query on a hello; each is queued only when there is room."""


class WebChatStore(OutboxConfirmations, ApprovalReads, Accounts, WebChats, Protocol):
    """What the web chat reads and writes itself: a chat's unconfirmed rows and open prompts (re-sent
    on every hello), the client's confirmations; with accounts, sessions and the chats each owns."""


class WebChatAdapter:
    """Also a ``PromptingPlatform``: prompts are frames with buttons, kept open by the store.
    ``takes_uploads``: its ``stored`` attachments are uploads it signed (``uploads.py``)."""

    platform = PLATFORM
    takes_uploads = True

    def __init__(
        self,
        store: WebChatStore,
        intake: Intake,
        *,
        max_text_chars: int = 16_000,
        access_token: str | None = None,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
        gate: SessionGate | None = None,
        session_check_seconds: float = 5.0,
        draft_interval: float = 0.05,
        hello_timeout: float = 10.0,
        keep_chats: bool = True,
        max_conversations: int | None = None,
        uploads: UploadSigner | None = None,
        models: ModelChoice | None = None,
    ) -> None:
        self.uploads = uploads
        self.capabilities = web_capabilities(draft_interval, files=uploads is not None)
        self._store = store
        self._hello_timeout = hello_timeout
        self._lines = LogBudget(log)
        """Rejected frames and closed idle sockets: strangers cause them, so a budget of lines."""
        self.gate = gate
        """The session cookie check of ``auth: accounts`` (None: hellos say who they are)."""
        self._signed = SignedSockets(store, PLATFORM, session_check_seconds) if gate is not None else None
        kept = keep_chats or gate is not None
        self._claims = ChatClaims(store, PLATFORM, max_conversations) if kept else None
        """Owners and titles of chats, for the conversation list (None: not kept, a bare test)."""
        self._intake = intake
        self._max_text = max_text_chars
        self._token = access_token
        self._max_queued_bytes = max_queued_bytes
        self._chats: dict[str, set[Connection]] = {}
        self._intake_open = True
        self._models = models  # the model profiles for the page's picker (None: no picker)

    @property
    def auth(self) -> str:
        """How browsers sign in: ``accounts``, ``token`` (one shared token) or ``none``."""
        return "accounts" if self.gate is not None else "token" if self._token is not None else "none"

    async def start(self) -> None:
        if self._signed is not None:  # the gateway's HTTP server accepts the sockets (``serve``)
            self._signed.start()

    def stop_intake(self) -> None:
        self._intake_open = False

    async def aclose(self, budget: float) -> None:
        if self._signed is not None:  # the sockets close with the HTTP server
            await self._signed.aclose()

    def end_sessions(self, session_ids: set[str] | None) -> None:
        """Close the sockets of ended sessions now (None: re-check them all now)."""
        if self._signed is not None:
            self._signed.end_sessions(session_ids)

    # ------------------------------------------------------------ outbound

    def _live(self, chat_id: str) -> list[Connection]:
        return [c for c in self._chats.get(chat_id, ()) if not c.closed]

    async def deliver(self, row: OutboxRow) -> DeliveryResult:
        conns = self._live(row.chat_id)
        if not conns:
            return Deferred("no web client is connected to this chat")
        frame = self._frame(row)
        sent = False
        for conn in conns:
            if conn.syncing:
                conn.held.append(frame)
                sent = True
            else:
                sent = conn.send(frame) or sent
        return Delivered(row.message_id) if sent else Deferred("web client went away")

    def _frame(self, row: OutboxRow) -> dict[str, Any]:
        return row_frame(row, self.uploads.file_link if self.uploads is not None else None)

    async def send_file(self, row: OutboxRow, file: OutFile, body: FileBody, caption: str) -> DeliveryResult:
        """``FilePlatform``: the frame names the file by its owner-only link (``uploads.py``)."""
        return await self.deliver(row)

    def _broadcast(self, chat_id: str, frame: dict[str, Any]) -> None:
        for conn in self._live(chat_id):
            if conn.syncing:
                conn.held.append(frame)
            else:
                conn.send(frame)

    async def send_prompt(self, chat_id: str, prompt: Prompt, target: Mapping[str, str]) -> DeliveryResult:
        """Shown to every connection of the chat now, and to each one that says hello while
        it is open (the approval record keeps it), so it never needs a retry."""
        self._broadcast(chat_id, prompt_frame(prompt))
        return Delivered(prompt.prompt_id)

    async def resolve_prompt(
        self, chat_id: str, prompt: Prompt, resolution: PromptResolution, target: Mapping[str, str]
    ) -> DeliveryResult:
        self._broadcast(chat_id, resolved_frame(prompt.prompt_id, resolution.outcome, resolution.text))
        return Delivered(prompt.prompt_id)

    async def draft(self, source: Source, in_reply_to: str | None, text: str) -> None:
        for conn in self._live(source.chat_id or ""):
            if not conn.syncing:
                conn.send_draft(in_reply_to, text)

    def state(self) -> AdapterState:
        clients = sum(len(self._live(chat)) for chat in list(self._chats))
        return AdapterState(connected=True, detail=f"{clients} browser connection(s)")

    # ------------------------------------------------------------ inbound

    async def serve(self, ws: WebSocket) -> None:
        """One socket: its frames in order until it goes. It must say an accepted hello within
        ``hello_timeout`` or it is closed (4408): an idle socket is a place a stranger holds."""
        signed = None
        if self.gate is not None:
            found = await self.gate.for_socket(ws)
            if isinstance(found, Refusal):
                await refuse(ws, found, self.gate)
                return
            signed = found
            vouch(ws)  # a valid session cookie: a signed-in user's socket
        await ws.accept()
        conn = Connection(ws, self._max_queued_bytes)
        conn.signed = signed
        if self._signed is not None:
            self._signed.add(conn)
        conn.start()
        hello_by = asyncio.get_running_loop().time() + self._hello_timeout
        try:
            while True:
                message = await next_message(ws, conn, hello_by, self._hello_timeout, self._lines)
                if message is None or message["type"] == "websocket.disconnect":
                    return
                raw = message.get("text")
                if raw is None:
                    raw = message.get("bytes") or b""
                await self._on_frame(conn, raw)
                if conn.closed:
                    return
        except WebSocketDisconnect:
            return
        finally:
            self._unregister(conn)
            if self._signed is not None:
                self._signed.discard(conn)
            await conn.close()

    def _unregister(self, conn: Connection) -> None:
        if conn.chat_id is not None:
            peers = self._chats.get(conn.chat_id)
            if peers is not None:
                peers.discard(conn)
                if not peers:
                    del self._chats[conn.chat_id]

    def _error(self, conn: Connection, code: str, message: str, frame_id: str | None = None) -> None:
        self._lines.warning(
            f"web frame: {code}",
            "web chat frame rejected",
            extra={"code": code, "reason": message, "chat_id": conn.chat_id},
        )
        frame: dict[str, Any] = {"type": "error", "code": code, "message": message}
        if frame_id is not None:
            frame["id"] = frame_id
        conn.send(frame)

    async def _on_frame(self, conn: Connection, raw: str | bytes) -> None:
        try:
            frame = decode(raw)
        except FrameError as exc:
            self._error(conn, exc.code, exc.message, exc.frame_id)
            return
        if isinstance(frame, Hello):
            await self._hello(conn, frame)
        elif conn.chat_id is None:
            self._error(conn, "not_ready", "send a hello frame first", getattr(frame, "id", None))
        elif isinstance(frame, Message):
            await self._message(conn, frame)
        elif isinstance(frame, Received):
            await self._received(conn, frame)
        elif isinstance(frame, Button):
            await self._button(conn, frame)

    async def _hello(self, conn: Connection, hello: Hello) -> None:
        if self._token is not None and not hmac.compare_digest(hello.token or "", self._token):
            self._error(conn, "unauthorized", "this web chat needs an access token in the hello frame")
            return
        vouch(conn.ws)  # the right token, or none needed: this socket is a user's
        conn.greeted = True
        signed = conn.signed.account if conn.signed is not None else None
        owner, name = (signed.user_id, signed.name) if signed is not None else (hello.user_id, hello.user_id)
        if self._claims is not None:
            problem = await self._claims.problem(hello.chat_id, owner, name, strict=signed is not None)
            if problem is not None:
                self._unregister(conn)
                conn.chat_id = None
                self._error(conn, *problem)
                return
        self._unregister(conn)
        conn.chat_id, conn.user_id, conn.user_name = hello.chat_id, hello.user_id, hello.user_name
        conn.titled = False
        if conn.signed is not None:  # the cookie says who this is; the hello's ids are not trusted
            conn.user_id, conn.user_name = conn.signed.account.user_id, conn.signed.account.name
        conn.syncing = True
        conn.held = []
        self._chats.setdefault(hello.chat_id, set()).add(conn)
        await self._hold_route(hello.chat_id)
        await self._sync(conn, hello.chat_id)

    async def _hold_route(self, chat_id: str) -> None:
        """In a fleet, the chat's replies (later ones too) follow its client to this process."""
        try:
            await self._store.hold_chat_route(PLATFORM, chat_id)
        except StoreUnavailable as exc:  # the backlog below still comes; later replies retry
            log.warning("could not move chat %r's replies to this process: %s", chat_id, exc)

    async def _sync(self, conn: Connection, chat_id: str) -> None:
        """``ready``, then the unconfirmed backlog a page at a time, as fast as the client reads,
        then the open prompts and what was held meanwhile.

        The socket's next frame is read when this returns: a client's frames are handled in
        the order sent, and what it sends meanwhile waits in the server's bounded receive
        queue (and then in TCP), so a receipt-per-reply client never holds anything up."""
        models = await self._models.ready_fields(conn.source(PLATFORM)) if self._models else {}
        conn.send({"type": "ready", **models})
        seen = await self._send_backlog(conn, chat_id)
        try:
            prompts = await self._store.open_approvals(PLATFORM, chat_id)
        except StoreUnavailable as exc:
            prompts = []
            self._error(conn, "storage_unavailable", f"could not load open approval prompts: {exc}")
        for record in prompts:
            if record.prompt_via == "buttons":
                seen.add("prompt:" + record.prompt_id)
                conn.send(prompt_frame(record.prompt()))
        for frame in conn.held:
            if held_key(frame) not in seen:
                conn.send(frame)
        conn.held = []
        conn.syncing = False

    async def _send_backlog(self, conn: Connection, chat_id: str) -> set[str]:
        seen: set[str] = set()
        cursor = 0
        while await conn.room():
            try:
                page = await self._store.unconfirmed_page(PLATFORM, chat_id, cursor, BACKLOG_PAGE)
            except StoreUnavailable as exc:
                self._error(conn, "storage_unavailable", f"could not load unconfirmed replies: {exc}")
                break
            for row in page:
                if not await conn.send_paced(self._frame(row)):
                    return seen
                seen.add(row.message_id)
            if len(page) < BACKLOG_PAGE:
                break
            cursor = page[-1].id
        return seen

    async def _message(self, conn: Connection, msg: Message) -> None:
        if not self._intake_open:
            self._error(conn, "shutting_down", f"{RESTARTING}; send this again after reconnecting", msg.id)
            return
        if len(msg.text) > self._max_text:
            too_long = f"text is {len(msg.text)} characters; the limit is {self._max_text}"
            self._error(conn, "too_large", too_long, msg.id)
            return
        if not msg.text.strip() and not msg.attachments:
            self._error(conn, "invalid_frame", "text must not be empty (without a file)", msg.id)
            return
        assert conn.chat_id is not None
        files = message_files(self.uploads, conn.chat_id, msg.attachments)
        if files is None:
            self._error(conn, "invalid_frame", "an attachment is not an upload of this conversation", msg.id)
            return
        inbound = Inbound(
            transport=PLATFORM,
            delivery_id=web_delivery_id(conn.chat_id, msg.id),
            source=conn.source(PLATFORM),
            text=msg.text,
            message_ref=msg.id,
            received_at=time.time(),
            attachments=files,
            payload=msg.payload(),  # Regenerate's "asks again", recorded with the message
        )
        answer = await self._intake.submit(inbound, patience=WAIT_BRIEFLY)
        if isinstance(answer, Refused):
            self._error(conn, answer.code, answer.message, msg.id)
        elif isinstance(answer, Unavailable):
            self._error(conn, "storage_unavailable", f"{answer.reason}; please resend", msg.id)
        else:  # the title before the ack (the page reloads its conversation list on an ack)
            title = None if self._claims is None else self._claims.title(conn, msg.text)
            await conn.send_after(title, {"type": "ack", "id": msg.id, "duplicate": not answer.new})

    async def _button(self, conn: Connection, tap: Button) -> None:
        """Admitted like a message (committed, deduped by ``id``, then acked); an answer that
        changed nothing is told, on this connection only, what was recorded instead."""
        if not self._intake_open:
            self._error(conn, "shutting_down", f"{RESTARTING}; tap again after reconnecting", tap.id)
            return
        assert conn.chat_id is not None
        button_id = tap.id or uuid.uuid4().hex
        inbound = Inbound(
            transport=PLATFORM,
            delivery_id=web_button_delivery_id(conn.chat_id, button_id),
            source=conn.source(PLATFORM),
            text=prompt_token(tap.prompt_id, tap.option_id),
            kind="button",
            action_id=button_id,
            message_ref=tap.prompt_id,
            received_at=time.time(),
            payload={"prompt_response": {"prompt_id": tap.prompt_id, "option_id": tap.option_id}},
            observes_labels=False,
        )
        answer = await self._intake.submit(inbound, patience=WAIT_BRIEFLY)
        if isinstance(answer, Refused):
            self._error(conn, answer.code, answer.message, tap.id)
            return
        if isinstance(answer, Unavailable):
            self._error(conn, "storage_unavailable", f"answer {answer.reason}; tap again", tap.id)
            return
        conn.send({"type": "ack", "id": button_id, "prompt_id": tap.prompt_id, "duplicate": not answer.new})
        feedback = answer.answer
        if feedback is not None and not feedback.won:
            conn.send(resolved_frame(feedback.prompt_id, feedback.outcome, feedback.text))

    async def _received(self, conn: Connection, frame: Received) -> None:
        ident = frame.message_id
        if ident not in conn.awaiting_receipt or not (ident.startswith("o") and ident[1:].isdigit()):
            self._error(conn, "invalid_frame", f"{ident!r} was not sent on this connection or is confirmed")
            return
        conn.awaiting_receipt.discard(ident)
        assert conn.chat_id is not None
        try:
            await self._store.confirm_outbox(PLATFORM, conn.chat_id, int(ident[1:]))
        except StoreUnavailable as exc:
            self._error(conn, "storage_unavailable", f"receipt not recorded; it will be re-sent: {exc}")
