"""A toy platform adapter built only from the adapter kit.

This is the runnable version of "Writing an adapter" in ``docs/architecture.md``. Like a
real adapter it imports only ``chatgate.domain``, ``chatgate.engine.ports`` and
``chatgate.platforms.kit`` (``test_toy_adapter.py`` checks), and its only code is what
no kit can know: decoding its wire, acknowledging by the intake's answer, encoding
outbox rows, and declaring capabilities and a lifecycle. Admission, dedupe, refusals,
the rejected log, storage retries, ordering, turns and the delivery ledger are the
engine's.

The wire: a TCP server on 127.0.0.1. Each client line is a JSON object
``{"id": ..., "chat": ..., "user": ..., "text": ...}``; ``id`` is the line's delivery id
(a client resends a line with the same id). The adapter answers each line with

- ``{"type": "ack", "id": ..., "duplicate": bool}``: saved (or saved before): do not resend;
- ``{"type": "ack", "id": ..., "refused": code, "reason": ...}``: will never be saved: do
  not resend, and here is why;
- ``{"type": "error", "id": ..., "code": ..., "message": ...}``: not saved: resend it later;

and later sends each reply as ``{"type": "reply", "chat", "message_id", "in_reply_to",
"kind", "text"}`` to every connection that has spoken in the chat. ``message_id`` is
stable across resends, so a client shows each one once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import time
from collections.abc import Mapping
from typing import Any

from chatgate.domain.inbound import Inbound
from chatgate.domain.outbound import Capabilities, Deferred, Delivered, DeliveryResult
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.source import Source
from chatgate.engine.ports import (
    WAIT_BRIEFLY,
    AdapterState,
    Admitted,
    Intake,
    IntakeAnswer,
    Refused,
    Unavailable,
    Undecodable,
    deliver_final,
)
from chatgate.platforms.kit.per_key import PerKeyQueues

PLATFORM = "toy"
TRANSPORT = "toy-line"
MAX_LINE = 64 * 1024


# ---------------------------------------------------------------- decode


def decode(line: bytes, received_at: float) -> Inbound | Undecodable:
    """One client line as an ``Inbound``, or why it cannot be one (never a guess)."""
    excerpt = line[:200].decode("utf-8", "replace")
    try:
        data = json.loads(line)
    except ValueError as exc:  # not UTF-8, or not JSON
        return Undecodable(TRANSPORT, f"not a JSON line: {exc}", None, excerpt, PLATFORM)
    if not isinstance(data, dict):
        return Undecodable(TRANSPORT, "a line must be a JSON object", None, excerpt, PLATFORM)
    line_id = data.get("id")
    if not isinstance(line_id, str) or not line_id:
        return Undecodable(TRANSPORT, "a line needs a string id", None, excerpt, PLATFORM)
    kind = data.get("type", "text")
    if kind != "text":
        return Undecodable(TRANSPORT, f"unsupported line type {kind!r}", line_id, excerpt, PLATFORM)
    chat, user, text = data.get("chat"), data.get("user"), data.get("text")
    if not isinstance(chat, str) or not isinstance(user, str) or not isinstance(text, str) or not text:
        return Undecodable(TRANSPORT, "chat, user and text must be strings", line_id, excerpt, PLATFORM)
    return Inbound(
        transport=TRANSPORT,
        delivery_id=line_id,
        source=Source(platform=PLATFORM, chat_id=chat, chat_type="dm", user_id=user),
        text=text,
        message_ref=line_id,
        received_at=received_at,
    )


# ---------------------------------------------------------------- acknowledge


def answer_line(line_id: str | None, answer: IntakeAnswer) -> dict[str, Any]:
    """The platform's acknowledgement, decided by the intake's answer alone."""
    if isinstance(answer, Unavailable):  # not committed: no ack, the client resends
        return {"type": "error", "id": line_id, "code": "storage_unavailable", "message": answer.reason}
    if isinstance(answer, Refused):  # recorded, never admitted: ack, and say why
        return {"type": "ack", "id": line_id, "refused": answer.code, "reason": answer.message}
    return {"type": "ack", "id": line_id, "duplicate": not answer.new}  # committed, now or before


# ---------------------------------------------------------------- encode


def encode(row: OutboxRow) -> dict[str, Any]:
    """One outbox row (a final, a notice, a command's reply) as a reply line."""
    return {
        "type": "reply",
        "chat": row.chat_id,
        "message_id": row.message_id,
        "in_reply_to": row.in_reply_to,
        "kind": row.kind,
        "text": row.text,
    }


class Peer:
    """One client connection."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    @property
    def closed(self) -> bool:
        return self._writer.is_closing()

    async def send(self, message: dict[str, Any]) -> bool:
        if self.closed:
            return False
        self._writer.write(json.dumps(message).encode() + b"\n")
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()
        return not self.closed

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()


# ---------------------------------------------------------------- the adapter


class ToyAdapter:
    platform = PLATFORM
    capabilities = Capabilities(max_length=2000)

    def __init__(self, intake: Intake, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._intake = intake
        self._host, self._port = host, port
        self._queues = PerKeyQueues(name="toy-intake")
        self._chats: dict[str, set[Peer]] = {}
        self._peers: set[Peer] = set()
        self._server: asyncio.Server | None = None
        self._accepting = False

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port, limit=MAX_LINE)
        self._accepting = True

    @property
    def port(self) -> int:
        assert self._server is not None, "start() first"
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def stop_intake(self) -> None:
        self._accepting = False  # new lines get an error (not an ack); replies still go out

    async def aclose(self, budget: float) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        await self._queues.aclose()  # what is still queued was never acknowledged: it is resent
        for peer in list(self._peers):
            await peer.close()
        if server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), budget)

    def state(self) -> AdapterState:
        serving = self._server is not None and self._server.is_serving()
        return AdapterState(serving, f"{len(self._peers)} connection(s)")

    # ------------------------------------------------------------ inbound

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(writer)
        self._peers.add(peer)
        try:
            while line := await reader.readline():
                await self._on_line(peer, line.strip())
        except (ConnectionError, ValueError):  # ValueError: a line over MAX_LINE
            pass
        finally:
            self._peers.discard(peer)
            for peers in self._chats.values():
                peers.discard(peer)
            await peer.close()

    async def _on_line(self, peer: Peer, line: bytes) -> None:
        if not line:
            return
        event = decode(line, time.time())
        if not self._accepting:
            await peer.send({"type": "error", "id": event.delivery_id, "code": "shutting_down"})
            return
        # One stream, many chats: admit different chats concurrently, one chat in arrival order.
        lane = (event.source.chat_id or "") if isinstance(event, Inbound) else ""
        await self._queues.put(lane, functools.partial(self._settle, peer, event))

    async def _settle(self, peer: Peer, event: Inbound | Undecodable) -> None:
        # The client is told "not saved" and resends: wait out a blip only (WAIT_BRIEFLY).
        answer = await self._intake.submit(event, patience=WAIT_BRIEFLY)
        if isinstance(answer, Admitted) and isinstance(event, Inbound):
            self._chats.setdefault(event.source.chat_id or "", set()).add(peer)
        await peer.send(answer_line(event.delivery_id, answer))

    # ------------------------------------------------------------ outbound

    def _live(self, chat_id: str) -> list[Peer]:
        return [p for p in self._chats.get(chat_id, ()) if not p.closed]

    async def _broadcast(self, chat_id: str, message: dict[str, Any]) -> bool:
        sent = [await peer.send(message) for peer in self._live(chat_id)]
        return any(sent)

    async def deliver(self, row: OutboxRow) -> DeliveryResult:
        if await self._broadcast(row.chat_id, encode(row)):
            return Delivered(row.message_id)
        return Deferred("no client of this chat is connected")

    async def draft(self, source: Source, in_reply_to: str | None, text: str) -> None:
        return None  # capabilities.drafts is False: the engine never calls it


class EditableToyAdapter(ToyAdapter):
    """The same platform if its clients could edit a message: an ``EditablePlatform``.

    The engine then streams each reply as a preview message it edits, and the final
    goes through ``deliver_final``, which edits the preview into the exact final text.
    """

    capabilities = Capabilities(edit=True, max_length=2000, edit_interval=0.0)

    def __init__(self, intake: Intake, *, duplicate_marker: str = "(maybe a repeat) ", **kw: Any) -> None:
        super().__init__(intake, **kw)
        self._marker = duplicate_marker
        self._ids = itertools.count(1)

    async def deliver(self, row: OutboxRow) -> DeliveryResult:
        return await deliver_final(self, row, self._marker)

    async def send_message(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        message_id = f"t{next(self._ids)}"
        line = {"type": "send", "chat": chat_id, "message_id": message_id, "in_reply_to": reply_to}
        if await self._broadcast(chat_id, {**line, "text": text}):
            return Delivered(message_id)
        return Deferred("no client of this chat is connected")

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        line = {"type": "edit", "chat": chat_id, "message_id": message_id, "text": text}
        if await self._broadcast(chat_id, line):
            return Delivered(message_id)
        return Deferred("no client of this chat is connected")

    async def send_typing(self, chat_id: str, target: Mapping[str, str]) -> None:
        return None  # capabilities.typing is False

    async def delete_message(self, chat_id: str, message_id: str, target: Mapping[str, str]) -> bool:
        return await self._broadcast(chat_id, {"type": "delete", "chat": chat_id, "message_id": message_id})
