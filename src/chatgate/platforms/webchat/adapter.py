"""The web chat adapter: WebSocket frames in, outbox rows and drafts out."""

from __future__ import annotations

import hmac
import logging
import time
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from chatgate.domain.inbound import Inbound
from chatgate.domain.outbound import Capabilities, Deferred, Delivered, DeliveryResult
from chatgate.domain.source import Source
from chatgate.engine.ports import AdapterState, AdmissionRefused, InboundSink
from chatgate.platforms.webchat.connection import Connection
from chatgate.platforms.webchat.protocol import FrameError, Hello, Message, Received, decode
from chatgate.store.base import OutboxRow, Store, StoreUnavailable

log = logging.getLogger(__name__)
PLATFORM = "web"


def web_delivery_id(chat_id: str, message_id: str) -> str:
    """Unambiguous per-chat dedupe key: the length prefix keeps ("a/b", "c") apart from ("a", "b/c")."""
    return f"{len(chat_id)}:{chat_id}/{message_id}"


def row_frame(row: OutboxRow) -> dict[str, Any]:
    kind = "notice" if row.kind == "notice" else "final"
    return {"type": kind, "message_id": row.message_id, "in_reply_to": row.in_reply_to, "text": row.text}


class WebChatAdapter:
    platform = PLATFORM
    capabilities = Capabilities(drafts=True, max_length=1_000_000, confirms_receipt=True)

    def __init__(
        self,
        store: Store,
        sink: InboundSink,
        *,
        max_text_chars: int = 16_000,
        access_token: str | None = None,
    ) -> None:
        self._store = store
        self._sink = sink
        self._max_text = max_text_chars
        self._token = access_token
        self._chats: dict[str, set[Connection]] = {}
        self._intake_open = True

    def stop_intake(self) -> None:
        self._intake_open = False

    # ------------------------------------------------------------ outbound

    def _live(self, chat_id: str) -> list[Connection]:
        return [c for c in self._chats.get(chat_id, ()) if not c.closed]

    async def deliver(self, row: OutboxRow) -> DeliveryResult:
        conns = self._live(row.chat_id)
        if not conns:
            return Deferred("no web client is connected to this chat")
        frame = row_frame(row)
        sent = False
        for conn in conns:
            if conn.syncing:
                conn.held.append(frame)
                sent = True
            else:
                sent = conn.send(frame) or sent
        return Delivered(row.message_id) if sent else Deferred("web client went away")

    async def draft(self, source: Source, in_reply_to: str | None, text: str) -> None:
        frame = {"type": "draft", "in_reply_to": in_reply_to, "text": text}
        for conn in self._live(source.chat_id or ""):
            if not conn.syncing:
                conn.send(frame)

    def state(self) -> AdapterState:
        clients = sum(len(self._live(chat)) for chat in list(self._chats))
        return AdapterState(connected=True, detail=f"{clients} browser connection(s)")

    # ------------------------------------------------------------ inbound

    async def serve(self, ws: WebSocket) -> None:
        await ws.accept()
        conn = Connection(ws)
        conn.start()
        try:
            while True:
                message = await ws.receive()
                if message["type"] == "websocket.disconnect":
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
            await conn.close()

    def _unregister(self, conn: Connection) -> None:
        if conn.chat_id is not None:
            peers = self._chats.get(conn.chat_id)
            if peers is not None:
                peers.discard(conn)
                if not peers:
                    del self._chats[conn.chat_id]

    def _error(self, conn: Connection, code: str, message: str, frame_id: str | None = None) -> None:
        log.warning(
            "web chat frame rejected", extra={"code": code, "reason": message, "chat_id": conn.chat_id}
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

    async def _hello(self, conn: Connection, hello: Hello) -> None:
        if self._token is not None and not hmac.compare_digest(hello.token or "", self._token):
            self._error(conn, "unauthorized", "this web chat needs an access token in the hello frame")
            return
        self._unregister(conn)
        conn.chat_id, conn.user_id, conn.user_name = hello.chat_id, hello.user_id, hello.user_name
        conn.syncing = True
        conn.held = []
        self._chats.setdefault(hello.chat_id, set()).add(conn)
        try:
            backlog = await self._store.unconfirmed_for_chat(PLATFORM, hello.chat_id)
        except StoreUnavailable as exc:
            backlog = []
            self._error(conn, "storage_unavailable", f"could not load unconfirmed replies: {exc}")
        conn.send({"type": "ready"})
        seen = set()
        for row in backlog:
            seen.add(row.message_id)
            conn.send(row_frame(row))
        for frame in conn.held:
            if frame["message_id"] not in seen:
                conn.send(frame)
        conn.held = []
        conn.syncing = False

    async def _message(self, conn: Connection, msg: Message) -> None:
        if not self._intake_open:
            self._error(
                conn, "shutting_down", "the gateway is restarting; send this again after reconnecting", msg.id
            )
            return
        if len(msg.text) > self._max_text:
            self._error(
                conn,
                "too_large",
                f"text is {len(msg.text)} characters; the limit is {self._max_text}",
                msg.id,
            )
            return
        if not msg.text.strip():
            self._error(conn, "invalid_frame", "text must not be empty", msg.id)
            return
        assert conn.chat_id is not None
        inbound = Inbound(
            transport=PLATFORM,
            delivery_id=web_delivery_id(conn.chat_id, msg.id),
            source=Source(
                platform=PLATFORM,
                chat_id=conn.chat_id,
                chat_type="dm",
                user_id=conn.user_id,
                user_name=conn.user_name,
            ),
            text=msg.text,
            message_ref=msg.id,
            received_at=time.time(),
        )
        try:
            admitted = await self._sink.admit(inbound)
        except AdmissionRefused as exc:
            self._error(conn, exc.code, exc.message, msg.id)
            return
        except StoreUnavailable as exc:
            self._error(conn, "storage_unavailable", f"not saved, please resend: {exc}", msg.id)
            return
        conn.send({"type": "ack", "id": msg.id, "duplicate": not admitted.new})

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
